// The row layout planner: the smallest layout that holds a row wins, clusters only where a row
// outgrows one CTA (and only where clusters exist), and each CTA's slice covers the row.
#include "fusekit/device/row/row_config.hpp"

#include <gtest/gtest.h>

namespace fusekit::device {
namespace {

constexpr int kBf16 = 2, kF32 = 4;

TEST(RowConfig, PicksTheSmallestLayoutThatHoldsTheRow) {
  using L = OneTensorConfigs;
  EXPECT_EQ(plan_rows<L>(128, kBf16, kMaxClusterCtas).config, 0);
  EXPECT_EQ(plan_rows<L>(256, kBf16, kMaxClusterCtas).config, 0);
  EXPECT_EQ(plan_rows<L>(257, kBf16, kMaxClusterCtas).config, 1);
  EXPECT_EQ(plan_rows<L>(4096, kBf16, kMaxClusterCtas).config, 2);
  EXPECT_EQ(plan_rows<L>(4096, kF32, kMaxClusterCtas).config, 3);
  const RowPlan p = plan_rows<L>(4096, kBf16, kMaxClusterCtas);
  EXPECT_EQ(p.cluster, 1);
}

TEST(RowConfig, SplitsLongRowsOverClustersThatCoverThem) {
  using L = OneTensorConfigs;
  for (const std::int64_t n : {16385, 65536, 131071, 131072, 262144}) {
    const RowPlan p = plan_rows<L>(n, kBf16, kMaxClusterCtas);
    ASSERT_GE(p.config, 0) << n;
    EXPECT_GE(std::int64_t{p.cluster} * p.slice, n) << n;
    EXPECT_LT(std::int64_t{p.cluster - 1} * p.slice, n) << n;  // no CTA without columns
    EXPECT_LE(p.cluster, kMaxClusterCtas) << n;
  }
  EXPECT_EQ(plan_rows<L>(65536, kBf16, kMaxClusterCtas).config, 3);
  EXPECT_EQ(plan_rows<L>(262144, kBf16, kMaxClusterCtas).config, 4);
  EXPECT_EQ(plan_rows<L>(262145, kBf16, kMaxClusterCtas).config, -1);
  EXPECT_EQ(plan_rows<L>(262144, kF32, kMaxClusterCtas).config, -1);
  EXPECT_EQ(max_row_length<L>(kF32, kMaxClusterCtas), 131072);
}

TEST(RowConfig, WithoutClustersOneCtaHoldsTheRow) {
  using L = OneTensorConfigs;
  EXPECT_EQ(plan_rows<L>(16384, kBf16, 1).cluster, 1);
  EXPECT_EQ(plan_rows<L>(16384, kBf16, 1).config, 3);
  EXPECT_EQ(plan_rows<L>(16385, kBf16, 1).config, -1);  // the 512×8 layout is cluster-only
  EXPECT_EQ(max_row_length<L>(kBf16, 1), 16384);
}

}  // namespace
}  // namespace fusekit::device
