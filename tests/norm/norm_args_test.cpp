// Argument validation of the fused norms, which runs before any device access: each
// bad argument is rejected with an InvalidArgument error that names it. No GPU needed (the
// pointers are never dereferenced).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "fusekit/error.hpp"
#include "fusekit/norm.hpp"
#include "fusekit/norm_quantize.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;

// NOTE: validation must reject the arguments before touching this address.
void* const kFake = testing::fake_pointer();

NormForwardArgs valid_norm() {
  NormForwardArgs a;
  a.kind = NormKind::LayerNorm;
  a.x = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  a.y = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  return a;
}

TEST(NormArgs, RejectsEachBadArgumentByName) {
  auto a = valid_norm();
  a.x.dtype = DType::E4M3;
  expect_error([&] { norm_forward(a); }, "x dtype");
  a = valid_norm();
  a.x = TensorView::contiguous(kFake, DType::BF16, {64});
  expect_error([&] { norm_forward(a); }, "x rank");
  a = valid_norm();
  a.x = TensorView::contiguous(kFake, DType::BF16, {8, 0});
  a.y = a.x;
  expect_error([&] { norm_forward(a); }, "x row length");
  a = valid_norm();
  a.x.strides[1] = 2;
  expect_error([&] { norm_forward(a); }, "x innermost stride");
  a = valid_norm();
  a.y = TensorView::contiguous(kFake, DType::BF16, {8, 65});
  expect_error([&] { norm_forward(a); }, "y shape");
  a = valid_norm();
  a.y.dtype = DType::F16;
  expect_error([&] { norm_forward(a); }, "y dtype");
  a = valid_norm();
  a.weight = TensorView::contiguous(kFake, DType::BF16, {63});
  expect_error([&] { norm_forward(a); }, "weight shape");
  a = valid_norm();
  a.bias = TensorView::contiguous(kFake, DType::F32, {64});
  expect_error([&] { norm_forward(a); }, "bias dtype");
  a = valid_norm();
  a.rstd = TensorView::contiguous(kFake, DType::F32, {7});
  expect_error([&] { norm_forward(a); }, "rstd elements");
  a = valid_norm();
  a.mean = TensorView::contiguous(kFake, DType::BF16, {8});
  expect_error([&] { norm_forward(a); }, "mean dtype");
  a = valid_norm();
  a.kind = NormKind::RmsNorm;
  a.mean = TensorView::contiguous(kFake, DType::F32, {8});
  expect_error([&] { norm_forward(a); }, "mean");
  a = valid_norm();
  a.eps = -1.0f;
  expect_error([&] { norm_forward(a); }, "eps");
  a = valid_norm();
  a.kind = static_cast<NormKind>(2);
  expect_error([&] { norm_forward(a); }, "kind: expected LayerNorm or RmsNorm, got 2");
}

TEST(NormArgs, ResidualAndQuantizeArguments) {
  AddNormForwardArgs r;
  r.norm = valid_norm();
  r.residual = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  r.residual_out = TensorView::contiguous(kFake, DType::BF16, {9, 64});
  expect_error([&] { add_norm_forward(r); }, "residual_out shape");
  r.residual_out = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "y");  // y and residual_out are the same pointer

  NormQuantizeArgs q;
  q.norm = valid_norm();
  expect_error([&] { norm_quantize_forward(q); }, "y dtype");  // must be e4m3
  q.norm.y.dtype = DType::E4M3;
  q.scale = TensorView::contiguous(kFake, DType::F32, {2});
  expect_error([&] { norm_quantize_forward(q); }, "scale elements");
  q.scale_mode = Fp8ScaleMode::PerRow;
  expect_error([&] { norm_quantize_forward(q); }, "scale elements");
}

TEST(NormArgs, PerRowQuantizeNeedsItsScaleOutput) {
  NormQuantizeArgs q;
  q.norm = valid_norm();
  q.norm.y = TensorView::contiguous(testing::fake_address(1), DType::E4M3, {8, 64});
  q.scale_mode = Fp8ScaleMode::PerRow;
  expect_error([&] { norm_quantize_forward(q); }, "scale: expected f32 [rows] for PerRow");
}

// No rows: no scale to write, so an empty one is accepted (the device checks come next).
TEST(NormArgs, PerRowQuantizeOfNoRowsTakesAnEmptyScale) {
  NormQuantizeArgs q;
  q.norm = valid_norm();
  q.norm.x = TensorView::contiguous(kFake, DType::BF16, {0, 64});
  q.norm.y = TensorView::contiguous(testing::fake_address(1), DType::E4M3, {0, 64});
  q.scale_mode = Fp8ScaleMode::PerRow;
  testing::expect_device_check([&] { norm_quantize_forward(q); }, "x");
}

TEST(NormArgs, RejectsOverlapsThatWouldCorruptRows) {
  using testing::fake_address;
  // An e4m3 y over x: its row i lands on x's row i/2, which another CTA may not have read yet.
  NormQuantizeArgs q;
  q.norm = valid_norm();
  q.norm.y = TensorView::contiguous(kFake, DType::E4M3, {8, 64});
  q.scale = TensorView::contiguous(fake_address(2), DType::F32, {1});
  expect_error([&] { norm_quantize_forward(q); }, "y: expected memory disjoint from x");

  // A plain norm may run in place, but not on a y shifted by a row from x.
  auto a = valid_norm();
  a.x = TensorView::contiguous(fake_address(1), DType::BF16, {8, 64});
  a.y = TensorView::contiguous(fake_address(1, 128), DType::BF16, {8, 64});
  expect_error([&] { norm_forward(a); }, "y: expected memory disjoint from x, or x's exact view");

  AddNormForwardArgs r;
  r.norm = valid_norm();
  r.norm.x = TensorView::contiguous(fake_address(1), DType::BF16, {8, 64});
  r.norm.y = TensorView::contiguous(fake_address(2), DType::BF16, {8, 64});
  r.residual = TensorView::contiguous(fake_address(3), DType::BF16, {8, 64});
  r.residual_out = TensorView::contiguous(fake_address(2, 512), DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "y: expected memory disjoint from residual_out");
  r.residual_out = TensorView::contiguous(fake_address(3, 128), DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "residual_out: expected memory disjoint from residual");
  r.residual_out = TensorView::contiguous(fake_address(1, 2), DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "residual_out: expected memory disjoint from x");
}

// Outputs share no byte with any other argument outside the documented in-place pairs: each is
// written while other CTAs still read the rest.
TEST(NormArgs, RejectsOutputsOverlappingAnyOtherArgument) {
  using testing::fake_address;
  auto a = valid_norm();
  a.x = TensorView::contiguous(fake_address(1), DType::BF16, {8, 64});
  a.y = TensorView::contiguous(fake_address(2), DType::BF16, {8, 64});
  a.weight = TensorView::contiguous(fake_address(2, 256), DType::BF16, {64});
  expect_error([&] { norm_forward(a); }, "y: expected memory disjoint from weight");
  a.weight = TensorView::contiguous(fake_address(3), DType::BF16, {64});
  a.mean = TensorView::contiguous(fake_address(4), DType::F32, {8});
  a.rstd = TensorView::contiguous(fake_address(4, 16), DType::F32, {8});
  expect_error([&] { norm_forward(a); }, "mean: expected memory disjoint from rstd");
  a.rstd = TensorView::contiguous(fake_address(1, 64), DType::F32, {8});
  expect_error([&] { norm_forward(a); }, "rstd: expected memory disjoint from x");
  a.rstd = TensorView::contiguous(fake_address(5), DType::F32, {8});
  testing::expect_device_check([&] { norm_forward(a); }, "x");  // every check without a device passed

  AddNormForwardArgs r;
  r.norm = a;
  r.residual = TensorView::contiguous(fake_address(2), DType::BF16, {8, 64});  // y's exact view
  r.residual_out = TensorView::contiguous(fake_address(6), DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "y: expected memory disjoint from residual");
  r.residual = TensorView::contiguous(fake_address(7), DType::BF16, {8, 64});
  r.residual_out = TensorView::contiguous(fake_address(3), DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "residual_out: expected memory disjoint from weight");

  NormQuantizeArgs q;
  q.norm = a;
  q.norm.y.dtype = DType::E4M3;
  q.scale_mode = Fp8ScaleMode::PerRow;
  q.scale = TensorView::contiguous(fake_address(6), DType::F32, {8});
  q.amax = TensorView::contiguous(fake_address(6, 28), DType::F32, {1});  // the last row's scale
  expect_error([&] { norm_quantize_forward(q); }, "scale: expected memory disjoint from amax");
  q.amax = TensorView::contiguous(fake_address(1, 4), DType::F32, {1});
  expect_error([&] { norm_quantize_forward(q); }, "amax: expected memory disjoint from x");
  q.scale_mode = Fp8ScaleMode::PerTensor;
  q.scale = TensorView::contiguous(fake_address(7), DType::F32, {1});
  q.amax = q.scale;
  expect_error([&] { norm_quantize_forward(q); }, "amax: expected memory disjoint from scale");
}

// Rows must be unit-stride: a strided innermost dimension is refused, naming the tensor, by every
// forward norm (softmax's own: tests/softmax/softmax_forward_args_test.cpp).
TEST(NormArgs, RejectStridedRows) {
  auto strided = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  strided.strides = {128, 2, 0, 0};
  AddNormForwardArgs r;
  r.norm = valid_norm();
  r.residual = strided;
  r.residual_out = TensorView::contiguous(testing::fake_address(1), DType::BF16, {8, 64});
  expect_error([&] { add_norm_forward(r); }, "residual innermost stride");
  NormQuantizeArgs q;
  q.norm = valid_norm();
  q.norm.y = TensorView::contiguous(testing::fake_address(1), DType::E4M3, {8, 64});
  q.norm.y.strides = {128, 2, 0, 0};
  q.scale = TensorView::contiguous(testing::fake_address(2), DType::F32, {1});
  expect_error([&] { norm_quantize_forward(q); }, "y innermost stride");
}

}  // namespace
}  // namespace fusekit
