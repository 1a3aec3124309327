// DeviceTensor's shape checks, which run before any allocation: no GPU needed.
#include "fusekit/buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fusekit/error.hpp"
#include "support/expect_error.hpp"

namespace fusekit {
namespace {

using testing::expect_error;

// A shape whose bytes overflow 64 bits would wrap to a small allocation under a huge view.
TEST(DeviceTensor, RejectsShapesPast64BitsBeforeAllocating) {
  constexpr std::int64_t kWraps = 6148914691236517206;  // 3 × this wraps to 2 elements
  expect_error([] { DeviceTensor(DType::F32, {3, kWraps}); }, "shape: expected at most 2^63 - 1 bytes in all");
  expect_error([] { DeviceTensor(DType::BF16, {4, -1}); }, "shape[1]: expected >= 0");
}

}  // namespace
}  // namespace fusekit
