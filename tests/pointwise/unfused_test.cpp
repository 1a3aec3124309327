// Argument validation of the unfused single-op kernels (fusekit/pointwise.hpp), which runs
// before any device access: each bad argument is rejected naming it. No GPU needed (the
// addresses are never dereferenced).
#include "fusekit/pointwise.hpp"

#include <gtest/gtest.h>

#include "fusekit/error.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

TensorView matrix(std::size_t slot, std::size_t offset_bytes = 0) {
  return TensorView::contiguous(fake_address(slot, offset_bytes), DType::BF16, {8, 64});
}

// The structure checks come before the device's: a bad shape is named as such, not as a pointer.
TEST(UnfusedArgs, RejectsEachBadArgumentByName) {
  expect_error([] { gelu(TensorView::contiguous(fake_address(0), DType::BF16, {2, 8, 64}), matrix(1)); }, "x rank");
  expect_error([] { add(matrix(0), TensorView::contiguous(fake_address(1), DType::F16, {8, 64}), matrix(2)); },
               "r dtype");
  expect_error([] { add_bias(matrix(0), TensorView::contiguous(fake_address(1), DType::BF16, {63}), matrix(2)); },
               "bias shape");
}

// y may be x's or r's exact view (in place), never a shifted one, and never over the bias.
TEST(UnfusedArgs, RejectsOutputsOverlappingTheirInputs) {
  expect_error([] { gelu(matrix(0), matrix(0, 128)); }, "y: expected memory disjoint from x, or x's exact view");
  expect_error([] { add(matrix(0), matrix(1), matrix(1, 2)); }, "y: expected memory disjoint from r");
  expect_error([] { add_bias(matrix(0), TensorView::contiguous(fake_address(1, 64), DType::BF16, {64}), matrix(1)); },
               "y: expected memory disjoint from bias");
  testing::expect_device_check([] { add(matrix(0), matrix(1), matrix(1)); }, "x");  // in place: every check passed
}

}  // namespace
}  // namespace fusekit
