#pragma once
// Shared by GPU tests: skip visibly without a device, and fresh seeds that are printed on failure
// (support/seed.hpp: FUSEKIT_TEST_SEED replays one).
#include <gtest/gtest.h>

#include "fusekit/runtime.hpp"
#include "support/seed.hpp"

#define FUSEKIT_REQUIRE_GPU()                                                   \
  do {                                                                          \
    if (::fusekit::device_count() == 0)                                         \
      GTEST_SKIP() << "needs a CUDA GPU: " << ::fusekit::no_device_reason();    \
  } while (0)

namespace fusekit::testing {

// fusekit::set_sm_limit(sms) for a scope; the cap before it is restored at its end (a failed
// assertion included).
class ScopedSmLimit {
 public:
  explicit ScopedSmLimit(int sms) : before_(sm_limit()) { set_sm_limit(sms); }
  ~ScopedSmLimit() { set_sm_limit(before_); }
  ScopedSmLimit(const ScopedSmLimit&) = delete;
  ScopedSmLimit& operator=(const ScopedSmLimit&) = delete;

 private:
  int before_;
};

}  // namespace fusekit::testing
