// fusekit::grid_stride_ctas: a CTA per `threads` items, capped at `ctas_per_sm` per SM, never none;
// fusekit::set_sm_limit's cap, set and lifted, and a negative one refused (no GPU needed).
#include "fusekit/runtime.hpp"

#include <cstdint>

#include <gtest/gtest.h>

#include "support/expect_error.hpp"

namespace fusekit {
namespace {

TEST(GridStrideCtas, OneCtaPerThreadsItemsRoundedUp) {
  EXPECT_EQ(grid_stride_ctas(256, 256, 8, 132), 1);
  EXPECT_EQ(grid_stride_ctas(257, 256, 8, 132), 2);
  EXPECT_EQ(grid_stride_ctas(1000 * 256 - 1, 256, 8, 132), 1000);
}

TEST(GridStrideCtas, CappedAtCtasPerSmOfEverySm) {
  EXPECT_EQ(grid_stride_ctas(std::int64_t{1} << 40, 256, 8, 132), 8 * 132);
  EXPECT_EQ(grid_stride_ctas(std::int64_t{1} << 40, 256, 8, 108), 8 * 108);
  EXPECT_EQ(grid_stride_ctas(1057 * 256, 256, 8, 132), 1056);
}

TEST(GridStrideCtas, NoWorkStillLaunchesOne) {
  EXPECT_EQ(grid_stride_ctas(0, 256, 8, 132), 1);
  EXPECT_EQ(grid_stride_ctas(1, 128, 4, 132), 1);
}

TEST(SmLimit, SetThenLiftedAndANegativeCountRefusedByName) {
  ASSERT_EQ(sm_limit(), 0) << "no cap unless asked";
  set_sm_limit(92);
  EXPECT_EQ(sm_limit(), 92);
  set_sm_limit(0);
  EXPECT_EQ(sm_limit(), 0);
  testing::expect_error([] { set_sm_limit(-1); }, "sms");
  EXPECT_EQ(sm_limit(), 0) << "a refused cap changes nothing";
}

}  // namespace
}  // namespace fusekit
