#include <gtest/gtest.h>

#include "fusekit/error.hpp"
#include "fusekit/gemm.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::fake_pointer;

TEST(Epilogue, NamesRoundTripForAllSixteen) {
  EXPECT_EQ(std::size(kAllEpilogues), 16u);
  for (auto e : kAllEpilogues) EXPECT_EQ(parse_epilogue(epilogue_name(e)), e);
  EXPECT_EQ(parse_epilogue("gelu-bias"), Epilogue::GeluBias);
  EXPECT_THROW(parse_epilogue("SWIGLU"), Error);
}

TEST(Epilogue, RolesMatchCublasLtSemantics) {
  EXPECT_EQ(bias_role(Epilogue::GeluBias), BiasRole::Input);
  EXPECT_EQ(bias_role(Epilogue::DGeluBGrad), BiasRole::GradOutput);
  EXPECT_EQ(bias_role(Epilogue::Gelu), BiasRole::None);
  EXPECT_EQ(aux_role(Epilogue::ReluAuxBias), AuxRole::ReluMaskOutput);
  EXPECT_EQ(aux_role(Epilogue::DRelu), AuxRole::ReluMaskInput);
  EXPECT_EQ(aux_role(Epilogue::GeluAux), AuxRole::PreactOutput);
  EXPECT_EQ(aux_role(Epilogue::DGelu), AuxRole::PreactInput);
  EXPECT_EQ(bias_length(Epilogue::BGradA, 7, 9), 7);
  EXPECT_EQ(bias_length(Epilogue::BGradB, 7, 9), 9);
  EXPECT_EQ(bias_length(Epilogue::Bias, 7, 9), 9);
  EXPECT_EQ(relu_mask_row_bytes(1), 16);
  EXPECT_EQ(relu_mask_row_bytes(128), 16);
  EXPECT_EQ(relu_mask_row_bytes(129), 32);
}

// Shape and dtype errors are raised before any device call, so they are testable without a GPU.
TEST(GemmValidation, RejectsBadArgumentsBeforeAnyLaunch) {
  GemmHandle handle;
  auto mat = [](DType t, std::int64_t r, std::int64_t c) { return TensorView::matrix(fake_pointer(), t, r, c, c); };
  auto expect_error = [&](const GemmArgs& g, const std::string& needle) {
    try {
      gemm(handle, g);
      ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  GemmArgs g;
  g.a = mat(DType::BF16, 64, 32);
  g.b = mat(DType::BF16, 48, 32);
  g.trans_b = Transpose::Yes;
  g.d = mat(DType::BF16, 64, 48);

  auto bad = g;
  bad.b = mat(DType::BF16, 48, 33);
  expect_error(bad, "b shape: expected K = 32");
  bad = g;
  bad.d = mat(DType::BF16, 64, 47);
  expect_error(bad, "d shape: expected [64, 48], got [64, 47]");
  bad = g;
  bad.b = mat(DType::F16, 48, 32);
  expect_error(bad, "b dtype: expected bf16, got f16");
  bad = g;
  bad.a.data = nullptr;
  expect_error(bad, "a: expected a non-null device pointer");
  bad = g;
  bad.epilogue = Epilogue::GeluBias;
  expect_error(bad, "bias: expected a non-null device pointer");
  bad.bias = TensorView::contiguous(fake_pointer(), DType::BF16, {64});
  expect_error(bad, "bias shape: expected [48], got [64]");
  bad = g;
  bad.bias = TensorView::contiguous(fake_pointer(), DType::BF16, {48});
  expect_error(bad, "bias: expected none for epilogue DEFAULT");
  bad = g;
  bad.epilogue = Epilogue::GeluAux;
  bad.aux = mat(DType::BF16, 64, 44);
  expect_error(bad, "aux shape: expected [64, 48]");
  bad = g;
  bad.beta = 1.0f;
  expect_error(bad, "c: expected a tensor when beta != 0");
  bad = g;
  bad.a = mat(DType::E4M3, 64, 32);
  bad.b = mat(DType::E4M3, 48, 32);
  bad.trans_b = Transpose::No;
  bad.b = mat(DType::E4M3, 32, 48);
  expect_error(bad, "trans_a/trans_b: expected No/Yes for fp8");
  bad = g;
  bad.trans_a = static_cast<Transpose>(2);
  expect_error(bad, "trans_a: expected No or Yes, got 2");
  bad = g;
  bad.epilogue = static_cast<Epilogue>(40);
  expect_error(bad, "epilogue: expected one of the 16 Epilogue values, got 40");
}

TEST(GemmValidation, RejectsAnEmptyBatchAndASharedBiasGradient) {
  GemmHandle handle;
  auto batch = [](DType t, std::int64_t n, std::int64_t r, std::int64_t c) {
    return TensorView::batched(fake_pointer(), t, n, r, c, c, r * c);
  };
  GemmArgs g;
  g.a = batch(DType::BF16, 0, 64, 32);
  g.b = batch(DType::BF16, 0, 48, 32);
  g.trans_b = Transpose::Yes;
  g.d = batch(DType::BF16, 0, 64, 48);
  testing::expect_error([&] { gemm(handle, g); }, "d batch: expected >= 1, got 0");

  // Three batches of bias gradients into one vector would each overwrite the others' sums.
  g.a = batch(DType::BF16, 3, 64, 32);
  g.b = batch(DType::BF16, 3, 48, 32);
  g.d = batch(DType::BF16, 3, 64, 48);
  g.epilogue = Epilogue::BGradB;
  g.bias = TensorView::contiguous(fake_pointer(), DType::BF16, {48});
  testing::expect_error([&] { gemm(handle, g); }, "bias shape: expected [3, 48], got [48]");
}

}  // namespace
}  // namespace fusekit
