// fusekit::set_sm_limit on a GPU: the current device's sm_count is the cap where it is below the
// device's own SMs and the device's otherwise, grid-stride launches size for it, and lifting the
// cap restores the device's count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "fusekit/runtime.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

TEST(SmLimitGpu, CapsTheSmsGridsAreSizedFor) {
  FUSEKIT_REQUIRE_GPU();
  const int device_sms = current_device_info().device_sm_count;
  ASSERT_GT(device_sms, 1);
  ASSERT_EQ(current_device_info().sm_count, device_sms) << "no cap unless asked";
  constexpr int kCtasPerSm = 4, kThreads = 256;
  constexpr std::int64_t kMuchWork = std::int64_t{1} << 40;
  for (const int cap : {1, device_sms / 2, device_sms - 1, device_sms, device_sms + 5}) {
    SCOPED_TRACE(::testing::Message() << "cap " << cap << " of " << device_sms);
    testing::ScopedSmLimit limit(cap);
    const int want = std::min(cap, device_sms);
    EXPECT_EQ(current_device_info().sm_count, want);
    EXPECT_EQ(current_device_info().device_sm_count, device_sms);
    EXPECT_EQ(grid_stride_ctas(kMuchWork, kThreads, kCtasPerSm), kCtasPerSm * want);
  }
  EXPECT_EQ(current_device_info().sm_count, device_sms) << "lifted at the scope's end";
}

}  // namespace
}  // namespace fusekit
