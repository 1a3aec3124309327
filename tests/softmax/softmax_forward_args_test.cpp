// Argument validation of softmax forward, which runs before any device access: each bad argument
// is rejected with an InvalidArgument error that names it. No GPU needed (the pointers are never
// dereferenced).
#include <gtest/gtest.h>

#include <cmath>

#include "fusekit/error.hpp"
#include "fusekit/softmax.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

// NOTE: validation must reject the arguments before touching this address.
void* const kFake = testing::fake_pointer();

TEST(SoftmaxArgs, RejectsEachBadArgumentByName) {
  const auto x = TensorView::contiguous(kFake, DType::F16, {4, 64});
  expect_error([&] { softmax_forward({x, TensorView::contiguous(kFake, DType::F32, {4, 64})}); }, "y dtype");
  expect_error([&] { softmax_forward({x, TensorView::contiguous(kFake, DType::F16, {4, 64, 1})}); }, "y shape");
  expect_error([&] { softmax_forward({x, x, NAN}); }, "scale");
  expect_error([&] { softmax_forward({TensorView::contiguous(kFake, DType::U8, {4, 64}), x}); }, "x dtype");
}

// Rows must be unit-stride: a strided innermost dimension is refused, naming the tensor.
TEST(SoftmaxArgs, RejectStridedRows) {
  auto strided = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  strided.strides = {128, 2, 0, 0};
  const auto x = TensorView::contiguous(kFake, DType::BF16, {8, 64});
  expect_error([&] { softmax_forward({strided, x}); }, "x innermost stride");
  expect_error([&] { softmax_forward({x, strided}); }, "y innermost stride");
}

// In place through x's view, never a shifted one: it would overwrite rows not yet read.
TEST(SoftmaxArgs, RejectShiftedOutputs) {
  const auto y = TensorView::contiguous(fake_address(1, 128), DType::BF16, {8, 64});
  expect_error([&] { softmax_forward({TensorView::contiguous(fake_address(1), DType::BF16, {8, 64}), y}); },
               "y: expected memory disjoint from x, or x's exact view");
}

}  // namespace
}  // namespace fusekit
