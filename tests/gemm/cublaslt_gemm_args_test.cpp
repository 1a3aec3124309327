// Argument validation of gemm (cuBLASLt), which runs before any device access: each bad argument
// is rejected with an InvalidArgument error that names it. No GPU needed (the addresses are never
// dereferenced, and the handle creates nothing before the checks pass).
#include <gtest/gtest.h>

#include <cstdint>

#include "fusekit/error.hpp"
#include "fusekit/gemm.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

constexpr std::int64_t kM = 64, kN = 32, kK = 16;

// Each operand in its own slot of fake addresses.
enum Slot : std::size_t { kSlotA, kSlotB, kSlotD, kSlotBias, kSlotAux, kSlotScale, kSlotAmax };

// D [M,N] = A [M,K] · B [N,K]ᵀ, every operand at its own address.
GemmArgs valid(DType in = DType::BF16, DType out = DType::BF16) {
  GemmArgs g;
  g.a = TensorView::matrix(fake_address(kSlotA), in, kM, kK, kK);
  g.b = TensorView::matrix(fake_address(kSlotB), in, kN, kK, kK);
  g.d = TensorView::matrix(fake_address(kSlotD), out, kM, kN, kN);
  g.trans_b = Transpose::Yes;
  return g;
}

void run(const GemmArgs& g) {
  GemmHandle handle;
  gemm(handle, g);
}

// Every output (d, an aux output, a bias gradient, the amax) shares no byte with any argument
// it is not documented to alias: cuBLASLt writes them while it still reads the rest.
TEST(GemmArgs, RejectsOutputsOverlappingAnyOtherArgument) {
  auto g = valid();
  g.epilogue = Epilogue::Bias;
  g.bias = TensorView::contiguous(fake_address(kSlotD, 2 * kN), DType::BF16, {kN});  // d's second row
  expect_error([&] { run(g); }, "d: expected memory disjoint from bias");

  g = valid();
  g.epilogue = Epilogue::GeluAuxBias;
  g.bias = TensorView::contiguous(fake_address(kSlotBias), DType::BF16, {kN});
  g.aux = TensorView::matrix(fake_address(kSlotA), DType::BF16, kM, kN, kN);
  expect_error([&] { run(g); }, "aux: expected memory disjoint from a");
  g.aux = TensorView::matrix(fake_address(kSlotBias, 2), DType::BF16, kM, kN, kN);
  expect_error([&] { run(g); }, "aux: expected memory disjoint from bias");
  g.aux = TensorView::matrix(fake_address(kSlotAux), DType::BF16, kM, kN, kN);
  testing::expect_device_check([&] { run(g); }, "a");  // every check without a device passed

  g = valid();
  g.epilogue = Epilogue::DReluBGrad;  // the bias gradient is an output
  g.aux = TensorView::matrix(fake_address(kSlotAux), DType::U8, kM, relu_mask_row_bytes(kN), relu_mask_row_bytes(kN));
  g.bias = TensorView::contiguous(fake_address(kSlotB, 4), DType::BF16, {kN});
  expect_error([&] { run(g); }, "bias: expected memory disjoint from b");
  g.bias = TensorView::contiguous(fake_address(kSlotAux, 2), DType::BF16, {kN});
  expect_error([&] { run(g); }, "bias: expected memory disjoint from aux");

  g = valid(DType::E4M3, DType::E4M3);
  g.fp8.amax_d = static_cast<float*>(fake_address(kSlotD, kN));
  expect_error([&] { run(g); }, "fp8.amax_d: expected memory disjoint from d");
  g.fp8.amax_d = static_cast<float*>(fake_address(kSlotScale));
  g.fp8.d_scale = static_cast<const float*>(fake_address(kSlotScale));
  expect_error([&] { run(g); }, "fp8.amax_d: expected memory disjoint from fp8.d_scale");
  g.fp8.amax_d = static_cast<float*>(fake_address(kSlotAmax));
  g.fp8.a_scale = static_cast<const float*>(fake_address(kSlotD, 16));
  expect_error([&] { run(g); }, "d: expected memory disjoint from fp8.a_scale");
}

// cuBLASLt reads the scales with 16-byte accesses and computes an amax only for an fp8 D.
TEST(GemmArgs, RejectsFp8ScalesItCannotApply) {
  auto g = valid(DType::E4M3, DType::BF16);
  g.fp8.a_scale = static_cast<const float*>(fake_address(kSlotScale, 4));
  expect_error([&] { run(g); }, "fp8.a_scale address: expected a multiple of 16 bytes");
  g.fp8.a_scale = nullptr;
  g.fp8.amax_d = static_cast<float*>(fake_address(kSlotAmax));
  expect_error([&] { run(g); }, "fp8.amax_d: expected null unless d is fp8");
}

// cuBLASLt's batch count is a 32-bit integer: a larger batch is refused, not truncated.
TEST(GemmArgs, RejectsBatchesPast32Bits) {
  constexpr std::int64_t kBatch = std::int64_t{1} << 31;
  GemmArgs g;
  g.a = TensorView::batched(fake_address(kSlotA), DType::BF16, kBatch, 1, kK, kK, kK);
  g.b = TensorView::batched(fake_address(kSlotB), DType::BF16, kBatch, kN, kK, kK, kN * kK);
  g.d = TensorView::batched(fake_address(kSlotD), DType::BF16, kBatch, 1, kN, kN, kN);
  g.trans_b = Transpose::Yes;
  expect_error([&] { run(g); }, "d batch: expected at most 2^31 - 1");
}

// A single row's stride addresses nothing, so any value a view carries (0 included) is accepted;
// cuBLASLt is given the least leading dimension it takes instead.
TEST(GemmArgs, AcceptsAnyStrideOnASingleRow) {
  auto g = valid();
  g.a = TensorView::matrix(fake_address(kSlotA), DType::BF16, 1, kK, 0);
  g.d = TensorView::matrix(fake_address(kSlotD), DType::BF16, 1, kN, 0);
  g.epilogue = Epilogue::GeluAuxBias;
  g.bias = TensorView::contiguous(fake_address(kSlotBias), DType::BF16, {kN});
  g.aux = TensorView::matrix(fake_address(kSlotAux), DType::BF16, 1, kN, 0);
  testing::expect_device_check([&] { run(g); }, "a");  // every check without a device passed
}

}  // namespace
}  // namespace fusekit
