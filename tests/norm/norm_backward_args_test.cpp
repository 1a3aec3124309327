// Argument validation of the fused norm backward, which runs before any device access: each bad
// argument is rejected with an InvalidArgument error that names it. No GPU needed (the pointers
// are never dereferenced).
#include <gtest/gtest.h>

#include <string>

#include "fusekit/error.hpp"
#include "fusekit/norm_backward.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;

// NOTE: validation must reject the arguments before touching this address.
void* const kFake = testing::fake_pointer();

NormBackwardArgs valid_norm() {
  NormBackwardArgs a;
  a.kind = NormKind::LayerNorm;
  a.x = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  a.dy = a.x;
  a.dx = a.x;
  a.mean = TensorView::contiguous(testing::fake_address(8), DType::F32, {8});
  a.rstd = a.mean;
  return a;
}

TEST(NormBackwardArgs, RejectsEachBadArgumentByName) {
  auto a = valid_norm();
  a.x.dtype = DType::E4M3;
  expect_error([&] { norm_backward(a); }, "x dtype");
  a = valid_norm();
  a.dy = TensorView::contiguous(kFake, DType::BF16, {8, 65});
  expect_error([&] { norm_backward(a); }, "dy");
  a = valid_norm();
  a.dx = TensorView::contiguous(kFake, DType::F16, {8, 64});
  expect_error([&] { norm_backward(a); }, "dx dtype");
  a = valid_norm();
  a.weight = TensorView::contiguous(kFake, DType::BF16, {63});
  expect_error([&] { norm_backward(a); }, "weight");
  a = valid_norm();
  a.dweight = TensorView::contiguous(kFake, DType::F32, {64});
  expect_error([&] { norm_backward(a); }, "dweight dtype");
  a = valid_norm();
  a.dbias = TensorView::contiguous(kFake, DType::BF16, {65});
  expect_error([&] { norm_backward(a); }, "dbias");
  a = valid_norm();
  a.mean = {};
  expect_error([&] { norm_backward(a); }, "mean");
  a = valid_norm();
  a.kind = NormKind::RmsNorm;
  expect_error([&] { norm_backward(a); }, "mean");
  a = valid_norm();
  a.rstd = TensorView::contiguous(kFake, DType::F32, {7});
  expect_error([&] { norm_backward(a); }, "rstd elements");
  a = valid_norm();
  a.rstd = {};
  expect_error([&] { norm_backward(a); }, "rstd");
  a = valid_norm();
  a.kind = static_cast<NormKind>(2);
  expect_error([&] { norm_backward(a); }, "kind: expected LayerNorm or RmsNorm, got 2");
  a = valid_norm();
  a.dweight = TensorView::contiguous(kFake, DType::BF16, {64});
  expect_error([&] { norm_backward(a); }, "workspace");
  a.workspace = TensorView::contiguous(static_cast<char*>(kFake) + 4, DType::U8, {4096});
  expect_error([&] { norm_backward(a); }, "workspace");
  expect_error([&] { norm_backward_workspace_bytes(8, 0, DType::BF16); }, "row length");
}

// Every plan gives the rows at least one CTA group, whose partials (an [n] f32 row per gradient)
// fill the least workspace any device needs: less is refused before any device access.
TEST(NormBackwardArgs, RejectsAWorkspaceBelowOneGroupsPartials) {
  using testing::fake_address;
  constexpr std::int64_t kOneGroupBytes = 2 * 64 * sizeof(float);  // valid_norm()'s rows of 64
  auto a = valid_norm();
  a.dweight = TensorView::contiguous(fake_address(5), DType::BF16, {64});
  a.workspace = TensorView::contiguous(fake_address(6), DType::U8, {kOneGroupBytes - 16});
  expect_error([&] { norm_backward(a); }, "workspace bytes: expected at least " + std::to_string(kOneGroupBytes));
  a.workspace = TensorView::contiguous(fake_address(6), DType::U8, {kOneGroupBytes});
  testing::expect_device_check([&] { norm_backward(a); }, "x");  // every check without a device passed
}

// Rows must be unit-stride: a strided innermost dimension is refused, naming the tensor.
TEST(NormBackwardArgs, RejectStridedRows) {
  auto a = valid_norm();
  a.x.strides = {128, 2, 0, 0};
  expect_error([&] { norm_backward(a); }, "x innermost stride");
  a = valid_norm();
  a.dx.strides = {128, 2, 0, 0};
  expect_error([&] { norm_backward(a); }, "dx innermost stride");
}

// The other outputs (dweight, dbias, the workspace of their partials) share no byte with any
// other argument, nor dx with them or with the weight and statistics.
TEST(NormBackwardArgs, RejectOutputsOverlappingAnyOtherArgument) {
  using testing::fake_address;
  auto a = valid_norm();
  a.dx = TensorView::contiguous(fake_address(8), DType::BF16, {8, 64});
  expect_error([&] { norm_backward(a); }, "dx: expected memory disjoint from mean");
  a.dx = a.x;
  a.mean = TensorView::contiguous(fake_address(2), DType::F32, {8});
  a.rstd = TensorView::contiguous(fake_address(3), DType::F32, {8});
  a.weight = TensorView::contiguous(fake_address(4), DType::BF16, {64});
  a.dweight = TensorView::contiguous(fake_address(5), DType::BF16, {64});
  a.dbias = TensorView::contiguous(fake_address(5, 64), DType::BF16, {64});
  a.workspace = TensorView::contiguous(fake_address(6), DType::U8, {1 << 20});
  expect_error([&] { norm_backward(a); }, "dweight: expected memory disjoint from dbias");
  a.dbias = TensorView::contiguous(fake_address(4), DType::BF16, {64});
  expect_error([&] { norm_backward(a); }, "dbias: expected memory disjoint from weight");
  a.dbias = TensorView::contiguous(fake_address(7), DType::BF16, {64});
  a.dx = TensorView::contiguous(fake_address(9), DType::BF16, {8, 64});
  a.workspace = TensorView::contiguous(kFake, DType::U8, {1 << 20});  // over x and dy
  expect_error([&] { norm_backward(a); }, "workspace: expected memory disjoint from x");
  a.workspace = TensorView::contiguous(fake_address(6), DType::U8, {1 << 20});
  testing::expect_device_check([&] { norm_backward(a); }, "x");  // every check without a device passed
}

// dx may be dy's (or x's, y's) exact view, never a shifted one: it would overwrite rows not yet read.
TEST(NormBackwardArgs, RejectPartialOverlaps) {
  using testing::fake_address;
  auto a = valid_norm();
  a.x = TensorView::contiguous(fake_address(1), DType::BF16, {8, 64});
  a.dy = TensorView::contiguous(fake_address(2), DType::BF16, {8, 64});
  a.dx = TensorView::contiguous(fake_address(2, 128), DType::BF16, {8, 64});
  expect_error([&] { norm_backward(a); }, "dx: expected memory disjoint from dy, or dy's exact view");
  a.dx = TensorView::contiguous(fake_address(1, 256), DType::BF16, {8, 64});
  expect_error([&] { norm_backward(a); }, "dx: expected memory disjoint from x");
}

}  // namespace
}  // namespace fusekit
