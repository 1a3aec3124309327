#pragma once
// Shared by GPU tests: skip visibly without a device, and fresh seeds that are printed on failure.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "fusekit/runtime.hpp"

#define FUSEKIT_REQUIRE_GPU()                                                   \
  do {                                                                          \
    if (::fusekit::device_count() == 0)                                         \
      GTEST_SKIP() << "needs a CUDA GPU: " << ::fusekit::no_device_reason();    \
  } while (0)

namespace fusekit::testing {

// A fresh 64-bit seed per call: every run draws new inputs.
inline std::uint64_t fresh_seed() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) | rd();
}

}  // namespace fusekit::testing
