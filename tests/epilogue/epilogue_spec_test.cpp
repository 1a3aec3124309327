#include <gtest/gtest.h>

#include <cmath>

#include "fusekit/epilogue.hpp"
#include "fusekit/error.hpp"
#include "fusekit/reference/activation.hpp"
#include "fusekit/reference/epilogue.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_pointer;

TEST(EpilogueSpec, PrintsComparesAndHashes) {
  const auto a = EpilogueSpec{}.scale(0.5f).bias().gelu_tanh().residual();
  const auto b = EpilogueSpec{}.scale(0.5f).bias().gelu_tanh().residual();
  const auto c = EpilogueSpec{}.scale(0.5f).bias().gelu_erf().residual();
  EXPECT_EQ(a.to_string(), "scale(0.5) → bias → gelu_tanh → residual");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a, c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_FALSE(a.uniform());
  EXPECT_TRUE(EpilogueSpec{}.scale(2).relu().clamp(-1, 1).uniform());
  EXPECT_EQ(EpilogueSpec{}.swiglu(64).gate_block(), 64);
  EXPECT_EQ(epilogue_output_columns(EpilogueSpec{}.swiglu(64), 256), 128);
}

TEST(EpilogueSpec, ValidationNamesWhatIsMissingOrWrong) {
  auto mat = [](std::int64_t r, std::int64_t c) { return TensorView::matrix(fake_pointer(), DType::BF16, r, c, c); };
  EpilogueTensors t;
  try {
    validate(EpilogueSpec{}.bias(), t, 8, 16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epilogue bias: expected a non-null"), std::string::npos) << e.what();
  }
  t.bias = TensorView::contiguous(fake_pointer(), DType::BF16, {15});
  EXPECT_THROW(validate(EpilogueSpec{}.bias(), t, 8, 16), Error);
  t.bias = TensorView::contiguous(fake_pointer(), DType::BF16, {16});
  EXPECT_NO_THROW(validate(EpilogueSpec{}.bias(), t, 8, 16));
  // After a gated node the residual has half the columns.
  t.residual = mat(8, 8);
  EXPECT_NO_THROW(validate(EpilogueSpec{}.swiglu(4).residual(), t, 8, 16));
  EXPECT_THROW(validate(EpilogueSpec{}.swiglu(3).residual(), t, 8, 16), Error);
  EXPECT_THROW(validate(EpilogueSpec{}.swiglu(4).geglu(2), t, 8, 16), Error);
  float scale = 1;
  t.quant_scale = &scale;
  EXPECT_THROW(validate(EpilogueSpec{}.quantize_e4m3().relu(), t, 8, 16), Error);
  EXPECT_NO_THROW(validate(EpilogueSpec{}.relu().quantize_e4m3(), t, 8, 16));
}

TEST(EpilogueSpec, ValidationRejectsUnknownValuesAndNegativeSizes) {
  EpilogueTensors t;
  expect_error([&] { validate(EpilogueSpec{}.cast(static_cast<DType>(42)), t, 8, 16); },
               "dtype: expected a float dtype");
  expect_error([&] { validate(EpilogueSpec{}.relu(), t, -1, 16); }, "M, N: expected both >= 0");
}

// The chain's outputs (the aux store, the amax) share no byte with its inputs or each other.
TEST(EpilogueSpec, ValidationRejectsOutputsOverlappingTheChainsTensors) {
  using testing::fake_address;
  EpilogueTensors t;
  t.bias = TensorView::contiguous(fake_address(0), DType::BF16, {16});
  t.aux = TensorView::matrix(fake_address(0, 16), DType::BF16, 8, 16, 16);
  expect_error([&] { validate(EpilogueSpec{}.bias().store_aux(), t, 8, 16); },
               "epilogue aux: expected memory disjoint from epilogue bias");
  t.aux = TensorView::matrix(fake_address(1), DType::BF16, 8, 16, 16);
  EXPECT_NO_THROW(validate(EpilogueSpec{}.bias().store_aux(), t, 8, 16));
  t.quant_scale = static_cast<const float*>(fake_address(2));
  t.amax = static_cast<float*>(fake_address(1, 4));
  expect_error([&] { validate(EpilogueSpec{}.bias().store_aux().quantize_e4m3(), t, 8, 16); },
               "epilogue aux: expected memory disjoint from epilogue amax");
  t.amax = static_cast<float*>(fake_address(2));
  expect_error([&] { validate(EpilogueSpec{}.bias().store_aux().quantize_e4m3(), t, 8, 16); },
               "epilogue amax: expected memory disjoint from epilogue quant_scale");
  t.amax = static_cast<float*>(fake_address(3));
  EXPECT_NO_THROW(validate(EpilogueSpec{}.bias().store_aux().quantize_e4m3(), t, 8, 16));
}

TEST(EpilogueReference, ChainMatchesHandComputation) {
  reference::Matrix acc(2, 4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) acc(i, j) = 0.25 * (i * 4 + j) - 1.0;
  reference::EpilogueInputs in;
  in.bias = {0.1, -0.2, 0.3, -0.4};
  in.residual = reference::Matrix(2, 4, 0.5);
  const auto r = reference::apply_epilogue(EpilogueSpec{}.scale(2).bias().store_aux().gelu_tanh().residual(), acc, in);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      const double pre = 2 * acc(i, j) + in.bias[j];
      EXPECT_DOUBLE_EQ(r.aux(i, j), pre);
      EXPECT_DOUBLE_EQ(r.out(i, j), reference::gelu_tanh(pre) + 0.5);
    }
}

// amax = max |x| before the scale, and a NaN anywhere makes it NaN (as the kernels record it),
// wherever the NaN comes in the order of the values.
TEST(EpilogueReference, QuantizeRecordsTheAmaxAndKeepsANaN) {
  reference::Matrix acc(2, 3);
  for (int j = 0; j < 3; ++j) {
    acc(0, j) = j - 1.5;
    acc(1, j) = 0.5 * j;
  }
  reference::EpilogueInputs in;
  in.quant_scale = 2.0;
  EXPECT_DOUBLE_EQ(reference::apply_epilogue(EpilogueSpec{}.quantize_e4m3(), acc, in).amax, 1.5);
  for (int at = 0; at < 6; ++at) {
    reference::Matrix with_nan = acc;
    with_nan.data[static_cast<std::size_t>(at)] = std::nan("");
    EXPECT_TRUE(std::isnan(reference::apply_epilogue(EpilogueSpec{}.quantize_e4m3(), with_nan, in).amax))
        << "NaN at element " << at;
  }
}

TEST(EpilogueReference, SwiGluPairsColumnBlocks) {
  reference::Matrix acc(1, 8);
  for (int j = 0; j < 8; ++j) acc(0, j) = j - 3.5;
  const auto r = reference::apply_epilogue(EpilogueSpec{}.swiglu(2), acc, {});
  ASSERT_EQ(r.out.cols, 4);
  // blocks of 2: gate columns {0,1}, up {2,3}; gate {4,5}, up {6,7}
  EXPECT_DOUBLE_EQ(r.out(0, 0), reference::silu(acc(0, 0)) * acc(0, 2));
  EXPECT_DOUBLE_EQ(r.out(0, 1), reference::silu(acc(0, 1)) * acc(0, 3));
  EXPECT_DOUBLE_EQ(r.out(0, 2), reference::silu(acc(0, 4)) * acc(0, 6));
  EXPECT_DOUBLE_EQ(r.out(0, 3), reference::silu(acc(0, 5)) * acc(0, 7));
}

}  // namespace
}  // namespace fusekit
