// Argument validation of softmax backward, which runs before any device access: each bad argument
// is rejected with an InvalidArgument error that names it. No GPU needed (the pointers are never
// dereferenced).
#include <gtest/gtest.h>

#include <cmath>

#include "fusekit/error.hpp"
#include "fusekit/softmax_backward.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

// NOTE: validation must reject the arguments before touching this address.
void* const kFake = testing::fake_pointer();

TEST(SoftmaxBackwardArgs, RejectsEachBadArgumentByName) {
  const auto y = TensorView::contiguous(kFake, DType::F16, {4, 64});
  expect_error([&] { softmax_backward({y, TensorView::contiguous(kFake, DType::F32, {4, 64}), y}); }, "dy dtype");
  expect_error([&] { softmax_backward({y, y, TensorView::contiguous(kFake, DType::F16, {4, 63})}); }, "dx");
  expect_error([&] { softmax_backward({y, y, y, NAN}); }, "scale");
  expect_error([&] { softmax_backward({TensorView::contiguous(kFake, DType::U8, {4, 64}), y, y}); }, "y dtype");
  expect_error([&] { softmax_backward({TensorView::contiguous(kFake, DType::F16, {64}), y, y}); }, "y rank");
}

// Rows must be unit-stride: a strided innermost dimension is refused, naming the tensor.
TEST(SoftmaxBackwardArgs, RejectStridedRows) {
  auto strided = TensorView::contiguous(kFake, DType::F16, {4, 64});
  strided.strides = {128, 2, 0, 0};
  const auto y = TensorView::contiguous(kFake, DType::F16, {4, 64});
  expect_error([&] { softmax_backward({strided, y, y}); }, "y innermost stride");
  expect_error([&] { softmax_backward({y, strided, y}); }, "dy innermost stride");
}

// dx may be dy's exact view, never a shifted one: it would overwrite rows not yet read.
TEST(SoftmaxBackwardArgs, RejectPartialOverlaps) {
  const auto y = TensorView::contiguous(fake_address(1), DType::F16, {4, 64});
  const auto dy = TensorView::contiguous(fake_address(2), DType::F16, {4, 64});
  expect_error([&] { softmax_backward({y, dy, TensorView::contiguous(fake_address(2, 2), DType::F16, {4, 64})}); },
               "dx: expected memory disjoint from dy");
}

}  // namespace
}  // namespace fusekit
