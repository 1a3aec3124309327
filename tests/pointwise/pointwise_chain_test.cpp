// Argument validation of pointwise_chain, which runs before any device access: each bad argument
// is rejected naming it. No GPU needed (the addresses are never dereferenced).
#include "fusekit/pointwise_chain.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include "fusekit/error.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

constexpr std::int64_t kRows = 8, kCols = 64;

PointwiseChainArgs valid(const EpilogueSpec& chain) {
  PointwiseChainArgs a;
  a.chain = chain;
  a.x = TensorView::contiguous(fake_address(0), DType::BF16, {kRows, kCols});
  a.y = TensorView::contiguous(fake_address(1), DType::BF16, {kRows, epilogue_output_columns(chain, kCols)});
  return a;
}

TEST(PointwiseChainArgs, RejectsEachBadArgumentByName) {
  auto a = valid(EpilogueSpec{}.gelu_tanh());
  a.x.strides = {2 * kCols, 2, 0, 0};
  expect_error([&] { pointwise_chain(a); }, "x innermost stride");
  a = valid(EpilogueSpec{}.gelu_tanh());
  a.y = TensorView::contiguous(fake_address(1), DType::BF16, {kRows, kCols / 2});
  expect_error([&] { pointwise_chain(a); }, "y shape");
  a = valid(EpilogueSpec{}.quantize_e4m3());
  a.tensors.quant_scale = static_cast<const float*>(fake_address(2));
  expect_error([&] { pointwise_chain(a); }, "y dtype: expected e4m3, got bf16");
  a.y.dtype = DType::E4M3;
  a.tensors.quant_scale = static_cast<const float*>(fake_address(2, 2));
  expect_error([&] { pointwise_chain(a); }, "epilogue quant_scale address: expected a multiple of 4 bytes");
  a = valid(EpilogueSpec{});
  for (int node = 0; node < 9; ++node) a.chain.scale(2.0f);
  expect_error([&] { pointwise_chain(a); }, "chain nodes: expected at most 8");
}

// The kernels index a row's columns (a gated pair's up column up to 2·N) in 32 bits.
TEST(PointwiseChainArgs, RejectsRowsPast32BitColumns) {
  constexpr std::int64_t kWide = std::int64_t{1} << 30;
  PointwiseChainArgs a;
  a.chain = EpilogueSpec{}.relu();
  a.x = TensorView::contiguous(fake_address(0), DType::BF16, {1, kWide});
  a.y = TensorView::contiguous(fake_address(1), DType::BF16, {1, kWide});
  expect_error([&] { pointwise_chain(a); }, "x columns: expected at most 2^30 - 1");
}

// y may be x's (or the residual's) exact view, never a shifted one, and never the aux store's.
TEST(PointwiseChainArgs, RejectsOverlapsThatWouldCorruptRows) {
  auto a = valid(EpilogueSpec{}.relu());
  a.y.data = fake_address(0, 2 * kCols);  // x's second row on
  expect_error([&] { pointwise_chain(a); }, "y: expected memory disjoint from x, or x's exact view");
  a = valid(EpilogueSpec{}.store_aux().relu());
  a.tensors.aux = TensorView::contiguous(fake_address(1, 64), DType::BF16, {kRows, kCols});
  expect_error([&] { pointwise_chain(a); }, "epilogue aux: expected memory disjoint from y");
  a = valid(EpilogueSpec{}.residual());
  a.tensors.residual = TensorView::contiguous(fake_address(1, 2), DType::BF16, {kRows, kCols});
  expect_error([&] { pointwise_chain(a); }, "y: expected memory disjoint from epilogue residual");
}

// The outputs (y, the aux store, the amax) share no byte with any other argument.
TEST(PointwiseChainArgs, RejectsOutputsOverlappingAnyOtherArgument) {
  auto a = valid(EpilogueSpec{}.bias());
  a.tensors.bias = TensorView::contiguous(fake_address(1, 2 * kCols), DType::BF16, {kCols});  // y's second row
  expect_error([&] { pointwise_chain(a); }, "y: expected memory disjoint from epilogue bias");
  a = valid(EpilogueSpec{}.store_aux().relu());
  a.tensors.aux = TensorView::contiguous(fake_address(0), DType::BF16, {kRows, kCols});
  expect_error([&] { pointwise_chain(a); }, "epilogue aux: expected memory disjoint from x");
  a = valid(EpilogueSpec{}.bias().store_aux());
  a.tensors.bias = TensorView::contiguous(fake_address(2), DType::BF16, {kCols});
  a.tensors.aux = TensorView::contiguous(fake_address(2, kCols), DType::BF16, {kRows, kCols});  // bias's second half on
  expect_error([&] { pointwise_chain(a); }, "epilogue aux: expected memory disjoint from epilogue bias");
  a = valid(EpilogueSpec{}.quantize_e4m3());
  a.y.dtype = DType::E4M3;
  a.tensors.quant_scale = static_cast<const float*>(fake_address(2));
  a.tensors.amax = static_cast<float*>(fake_address(0, 4));  // inside x
  expect_error([&] { pointwise_chain(a); }, "epilogue amax: expected memory disjoint from x");
  a.tensors.amax = static_cast<float*>(fake_address(2));
  expect_error([&] { pointwise_chain(a); }, "epilogue amax: expected memory disjoint from epilogue quant_scale");
  a.tensors.amax = static_cast<float*>(fake_address(3));
  testing::expect_device_check([&] { pointwise_chain(a); }, "x");  // every check without a device passed
}

}  // namespace
}  // namespace fusekit
