// The row layout planner: the fewest threads that hold a row at the config's chunks per thread
// (sub-warp lane groups for short rows, whole warps above), short rows packed into CTAs,
// clusters only where a row outgrows one CTA (and only where clusters exist), and the CTAs'
// slices cover the row with none empty.
#include "fusekit/device/row/row_config.hpp"

#include <gtest/gtest.h>

namespace fusekit::device {
namespace {

constexpr int kBf16 = 2, kF32 = 4;
using One = OneTensorRows;  // 4 chunks per thread
using Two = TwoTensorRows;  // 2 chunks per thread

template <class Config>
constexpr RowLayout plan(std::int64_t n, int element_bytes, int max_cluster) {
  return plan_rows<Config>(n, element_bytes, max_cluster);
}
template <class Config>
constexpr std::int64_t longest(int element_bytes, int max_cluster) {
  return max_row_length<Config>(element_bytes, max_cluster);
}

TEST(RowConfig, ShortRowsShareAWarpAndACta) {
  // bf16: 8 elements per chunk, so a thread of 4 chunks holds 32 elements.
  const RowLayout one = plan<One>(8, kBf16, kMaxClusterCtas);
  EXPECT_EQ(one.threads, 1);
  EXPECT_EQ(one.rows_per_cta, kMinBlockThreads);
  const RowLayout lanes = plan<One>(200, kBf16, kMaxClusterCtas);  // 25 chunks → 7 threads → 8 lanes
  EXPECT_EQ(lanes.threads, 8);
  EXPECT_EQ(lanes.rows_per_cta, 16);
  EXPECT_EQ(lanes.block_threads(), kMinBlockThreads);
  EXPECT_EQ(plan<One>(1024, kBf16, kMaxClusterCtas).threads, kWarpThreads);
}

TEST(RowConfig, LongerRowsTakeWholeWarpsSizedToTheRow) {
  const RowLayout two_warps = plan<One>(2048, kBf16, kMaxClusterCtas);
  EXPECT_EQ(two_warps.threads, 64);
  EXPECT_EQ(two_warps.rows_per_cta, 2);
  EXPECT_EQ(plan<One>(3001, kBf16, kMaxClusterCtas).threads, 96);  // 376 chunks → 94 → 3 warps
  const RowLayout full = plan<One>(4096, kBf16, kMaxClusterCtas);
  EXPECT_EQ(full.threads, 128);
  EXPECT_EQ(full.rows_per_cta, 1);
  EXPECT_EQ(full.cluster, 1);
  EXPECT_EQ(full.slice, 4096);
  EXPECT_EQ(plan<One>(4096, kF32, kMaxClusterCtas).threads, 256);
  EXPECT_EQ(plan<Two>(4096, kBf16, kMaxClusterCtas).threads, 256);
  EXPECT_EQ(plan<One>(16384, kBf16, kMaxClusterCtas).threads, kPreferredRowThreads);
}

TEST(RowConfig, RowsThatShareACtaArePowersOfTwoThreads) {
  // The kernels find a thread's row in its CTA by a shift (RowLayout::row_shift).
  for (std::int64_t n = 1; n <= 8192; ++n) {
    for (const RowLayout& layout : {plan<One>(n, kBf16, kMaxClusterCtas), plan<Two>(n, kF32, kMaxClusterCtas),
                                    plan<FewThreadRows8>(n, kBf16, kMaxClusterCtas),
                                    plan<FewThreadRows16>(n, kBf16, kMaxClusterCtas)}) {
      if (layout.rows_per_cta == 1) continue;
      EXPECT_EQ(1 << layout.row_shift, layout.threads) << n;
      EXPECT_EQ(layout.block_threads(), kMinBlockThreads) << n;
    }
  }
}

TEST(RowConfig, FewThreadRowsHoldA4096LongRowInOneWarpOrTwo) {
  const RowLayout sixteen = plan<FewThreadRows16>(4096, kBf16, kMaxClusterCtas);
  EXPECT_EQ(sixteen.threads, kWarpThreads);
  EXPECT_EQ(sixteen.rows_per_cta, kMinBlockThreads / kWarpThreads);
  EXPECT_EQ(sixteen.slice, 4096);
  const RowLayout eight = plan<FewThreadRows8>(4096, kBf16, kMaxClusterCtas);
  EXPECT_EQ(eight.threads, 2 * kWarpThreads);
  EXPECT_EQ(eight.rows_per_cta, 2);
  EXPECT_EQ(plan<FewThreadRows8>(8192, kBf16, kMaxClusterCtas).threads, kMinBlockThreads);
}

TEST(RowConfig, SplitsLongRowsOverClustersThatCoverThem) {
  for (const std::int64_t n : {32769, 40000, 65536, 131071, 131072, 262144}) {
    const RowLayout p = plan<One>(n, kBf16, kMaxClusterCtas);
    ASSERT_TRUE(p.valid()) << n;
    EXPECT_EQ(p.rows_per_cta, 1) << n;
    EXPECT_LE(p.threads, kMaxRowThreads) << n;
    EXPECT_EQ(p.threads % kWarpThreads, 0) << n;
    EXPECT_GE(std::int64_t{p.cluster} * p.slice, n) << n;
    EXPECT_LT(std::int64_t{p.cluster - 1} * p.slice, n) << n;  // no CTA without columns
    EXPECT_LE(p.cluster, kMaxClusterCtas) << n;
  }
  // Clusters of CTAs up to kPreferredRowThreads first: 32768 → 2 × 512 threads, 40000 (5000
  // chunks) → 3 × 448; past 8 such CTAs the CTAs grow instead: 262144 → 8 × 1024.
  EXPECT_EQ(plan<One>(32768, kBf16, kMaxClusterCtas).cluster, 2);
  EXPECT_EQ(plan<One>(32768, kBf16, kMaxClusterCtas).threads, kPreferredRowThreads);
  EXPECT_EQ(plan<One>(40000, kBf16, kMaxClusterCtas).cluster, 3);
  EXPECT_EQ(plan<One>(40000, kBf16, kMaxClusterCtas).threads, 448);
  EXPECT_EQ(plan<One>(262144, kBf16, kMaxClusterCtas).cluster, 8);
  EXPECT_EQ(plan<One>(262144, kBf16, kMaxClusterCtas).threads, kMaxRowThreads);
  EXPECT_FALSE(plan<One>(262145, kBf16, kMaxClusterCtas).valid());
  EXPECT_FALSE(plan<One>(262144, kF32, kMaxClusterCtas).valid());
  EXPECT_EQ(longest<One>(kF32, kMaxClusterCtas), 131072);
  EXPECT_EQ(longest<Two>(kBf16, kMaxClusterCtas), 131072);
}

TEST(RowConfig, ElementByElementRowsSplitOverClustersOfSixteen) {
  using Scalar = ScalarRows<One>;  // one chunk per thread, CTAs of up to 1024 threads
  constexpr int kClusters = kMaxNonPortableClusterCtas;
  // An odd vocabulary's f32 logits: 12565 chunks, 25 CTAs of 512 threads, so 13 of 992.
  const RowLayout vocab = plan<Scalar>(50257, kF32, kClusters);
  EXPECT_EQ(vocab.cluster, 13);
  EXPECT_EQ(vocab.threads, 992);
  EXPECT_GE(std::int64_t{vocab.cluster} * vocab.slice, 50257);
  EXPECT_LT(std::int64_t{vocab.cluster - 1} * vocab.slice, 50257);
  EXPECT_EQ(plan<Scalar>(131071, kBf16, kClusters).cluster, kClusters);
  EXPECT_FALSE(plan<Scalar>(131073, kBf16, kClusters).valid());
  EXPECT_EQ(longest<Scalar>(kBf16, kClusters), 131072);
  EXPECT_EQ(longest<Scalar>(kF32, kClusters), 65536);
  // The norm backward's CTAs of 512 threads: half as long.
  EXPECT_EQ(longest<ScalarRows<LoopingTwoTensorRows>>(kF32, kClusters), 32768);
  // Without clusters (before sm_90), one CTA.
  EXPECT_EQ(longest<Scalar>(kBf16, 1), 8192);
}

TEST(RowConfig, ShiftedRowsSpanOneChunkMoreOnClustersOfSixteen) {
  using Shifted = ShiftedRows<One>;  // four chunks per thread, CTAs of up to 1024 threads
  constexpr int kClusters = kMaxNonPortableClusterCtas;
  // An odd vocabulary's f32 logits: up to 50260 columns from the first chunk, 12565 chunks, 7 CTAs
  // of 512 threads, so 7 of 480.
  const RowLayout vocab = plan_shifted_rows<Shifted>(50257, kF32, kClusters);
  EXPECT_EQ(vocab.cluster, 7);
  EXPECT_EQ(vocab.threads, 480);
  EXPECT_GE(std::int64_t{vocab.cluster} * vocab.slice, 50257 + 3);
  // A row of whole chunks may start mid-chunk: 8 bf16 chunks span 9.
  EXPECT_EQ(plan_shifted_rows<Shifted>(64, kBf16, kClusters).threads, 4);  // 9 chunks → 3 → 4 lanes
  // The longest: one chunk short of the config's capacity.
  EXPECT_EQ(max_shifted_row_length<Shifted>(kF32, kClusters), 262141);
  EXPECT_EQ(plan_shifted_rows<Shifted>(262141, kF32, kClusters).cluster, kClusters);
  EXPECT_FALSE(plan_shifted_rows<Shifted>(262142, kF32, kClusters).valid());
  EXPECT_EQ(max_shifted_row_length<ShiftedRows<Two>>(kBf16, kClusters), 262137);
  EXPECT_FALSE(plan_shifted_rows<Shifted>(0, kF32, kClusters).valid());
  // Without clusters (before sm_90), one CTA.
  EXPECT_EQ(max_shifted_row_length<Shifted>(kBf16, 1), 32761);
}

TEST(RowConfig, WithoutClustersOneCtaHoldsTheRow) {
  EXPECT_EQ(plan<One>(32768, kBf16, 1).cluster, 1);
  EXPECT_EQ(plan<One>(32768, kBf16, 1).threads, kMaxRowThreads);
  EXPECT_FALSE(plan<One>(32769, kBf16, 1).valid());
  EXPECT_EQ(longest<One>(kBf16, 1), 32768);
}

TEST(RowConfig, QuantizingNormsStopAt512ThreadsPerCta) {
  EXPECT_EQ(plan<QuantizingRows>(16384, kBf16, kMaxClusterCtas).threads, kMaxRowThreads / 2);
  EXPECT_EQ(plan<QuantizingRows>(16385, kBf16, kMaxClusterCtas).cluster, 2);
  EXPECT_EQ(longest<QuantizingRows>(kBf16, kMaxClusterCtas), 131072);
}

// The bf16 LayerNorm → e4m3 rows of 40960–65536 columns are sliced over CTAs of four warps
// (src/norm/norm_forward.cu): one 8192-column slice per CTA, a CTA per row slice, at most a
// portable cluster of them.
TEST(RowConfig, QuantizingRowsSliceIntoFourWarpCtasWhenAsked) {
  constexpr int kFourWarps = 4 * kWarpThreads;
  for (const std::int64_t n : {40960, 49152, 57344, 65536}) {
    const RowLayout layout = plan_rows<QuantizingRows8>(n, kBf16, kMaxNonPortableClusterCtas, kFourWarps);
    EXPECT_EQ(layout.threads, kFourWarps) << n;
    EXPECT_EQ(layout.rows_per_cta, 1) << n;
    EXPECT_EQ(layout.slice, 8192) << n;
    EXPECT_EQ(std::int64_t{layout.slice} * layout.cluster, n) << n;
    EXPECT_LE(layout.cluster, kMaxClusterCtas) << n;
  }
}

// The norm launcher tests a row's layout for whole slices under OneTensorRows, then launches the
// ShortRows kernel where that layout's CTAs are small enough: the two must lay the row out alike.
TEST(RowConfig, ShortRowsLayRowsOutAsOneTensorRowsWhereTheirCtasHoldThem) {
  int short_layouts = 0;
  for (const int element : {kBf16, kF32}) {
    for (std::int64_t n = 8; n <= 16384; n += 8) {
      const RowLayout one = plan<One>(n, element, kMaxClusterCtas);
      if (one.block_threads() > ShortRows::kMaxThreads) continue;
      const RowLayout short_rows = plan<ShortRows>(n, element, kMaxClusterCtas);
      ++short_layouts;
      EXPECT_EQ(short_rows.threads, one.threads) << n;
      EXPECT_EQ(short_rows.rows_per_cta, one.rows_per_cta) << n;
      EXPECT_EQ(short_rows.cluster, 1) << n;
      EXPECT_EQ(short_rows.slice, one.slice) << n;
    }
  }
  EXPECT_EQ(short_layouts, 4096 / 8 + 2048 / 8);  // up to 4096 16-bit and 2048 f32 columns
}

TEST(RowConfig, SharedRowsTakeSixteenCtaClustersWhereAllowed) {
  // 16 chunks per thread, CTAs of up to 256 threads (64 KB of shared memory).
  EXPECT_EQ(plan<SharedRows>(16384, kBf16, kMaxNonPortableClusterCtas).threads, 128);
  EXPECT_EQ(plan<SharedRows>(32768, kBf16, kMaxNonPortableClusterCtas).threads, 256);
  EXPECT_EQ(plan<SharedRows>(32768, kBf16, kMaxNonPortableClusterCtas).cluster, 1);
  EXPECT_EQ(plan<SharedRows>(40000, kBf16, kMaxNonPortableClusterCtas).cluster, 2);
  EXPECT_EQ(plan<SharedRows>(262144, kF32, kMaxNonPortableClusterCtas).cluster, 16);
  EXPECT_EQ(longest<SharedRows>(kF32, kMaxNonPortableClusterCtas), 262144);
  // The portable limit and the register configs stay at 8 CTAs.
  EXPECT_FALSE(plan<SharedRows>(262144, kF32, kMaxClusterCtas).valid());
  EXPECT_EQ(longest<One>(kF32, kMaxNonPortableClusterCtas), 131072);
}

TEST(RowConfig, StagedNormRowsNarrowTheirCtasToTheSharedMemoryBudget) {
  // 8 chunks per thread, CTAs of up to 512 threads; the launcher caps the CTA so that the row
  // buffers, the weight and the bias fit: 384 threads at four planes.
  constexpr int kFourPlanes = 384;
  EXPECT_EQ(plan_rows<StagedNormRows>(16384, kBf16, kMaxNonPortableClusterCtas, kFourPlanes).threads, 256);
  const RowLayout split = plan_rows<StagedNormRows>(32768, kBf16, kMaxNonPortableClusterCtas, kFourPlanes);
  EXPECT_EQ(split.cluster, 2);
  EXPECT_EQ(split.threads, 256);
  EXPECT_EQ(plan_rows<StagedNormRows>(32768, kBf16, kMaxNonPortableClusterCtas).threads, 512);
  EXPECT_EQ(plan_rows<StagedNormRows>(262144, kF32, kMaxNonPortableClusterCtas).cluster, 16);
}

TEST(RowConfig, RereadRowsOfAddNormTakeTheFewestWarpsOfAtMostEightChunks) {
  constexpr auto kFewest = RereadPacking::FewestWarps;
  // 16-bit rows: 32768 → 4096 chunks → 512 threads; 65536 → 1024; 40000 → 5000 chunks → 20 warps
  // (some threads hold 7 chunks); 131072 → one 1024-thread CTA of 16 chunks each; f32 65536 alike.
  EXPECT_EQ(plan_reread_rows(32768, kBf16, kFewest).threads, 512);
  EXPECT_EQ(plan_reread_rows(65536, kBf16, kFewest).threads, kMaxRowThreads);
  EXPECT_EQ(plan_reread_rows(40000, kBf16, kFewest).threads, 640);
  const RowLayout longest_bf16 = plan_reread_rows(131072, kBf16, kFewest);
  EXPECT_EQ(longest_bf16.threads, kMaxRowThreads);
  EXPECT_EQ(longest_bf16.cluster, 1);
  EXPECT_EQ(longest_bf16.rows_per_cta, 1);
  EXPECT_GE(std::int64_t{longest_bf16.slice}, 131072);
  EXPECT_EQ(plan_reread_rows(65536, kF32, kFewest).threads, kMaxRowThreads);
  // Longer rows are not read twice: no cluster.
  EXPECT_FALSE(plan_reread_rows(131080, kBf16, kFewest).valid());
  EXPECT_FALSE(plan_reread_rows(65537, kF32, kFewest).valid());
}

TEST(RowConfig, RereadRowsFillAnSmWithTheMostRowsThatStayWithinTheirL2Bytes) {
  constexpr auto kFill = RereadPacking::FillSm;
  // Four 256-thread CTAs per SM while four rows take at most kRereadRowBytesPerSm (16-bit rows of
  // up to 24576 columns), two of 512 threads up to 49152 columns (up to 16 chunks per thread),
  // then one CTA of the fewest warps of at most 8 chunks each (57344 → 7168 chunks → 28 warps).
  EXPECT_EQ(plan_reread_rows(20480, kBf16, kFill).threads, 256);
  EXPECT_EQ(plan_reread_rows(24576, kBf16, kFill).threads, 256);
  EXPECT_EQ(plan_reread_rows(24584, kBf16, kFill).threads, 512);
  EXPECT_EQ(plan_reread_rows(32768, kBf16, kFill).threads, 512);
  EXPECT_EQ(plan_reread_rows(40000, kBf16, kFill).threads, 512);
  EXPECT_EQ(plan_reread_rows(49152, kBf16, kFill).threads, 512);
  EXPECT_EQ(plan_reread_rows(57344, kBf16, kFill).threads, 896);
  EXPECT_EQ(plan_reread_rows(65536, kBf16, kFill).threads, kMaxRowThreads);
  EXPECT_EQ(plan_reread_rows(12288, kF32, kFill).threads, 256);
  EXPECT_EQ(plan_reread_rows(32768, kF32, kFill).threads, kMaxRowThreads);
  // Past 8 chunks per thread of a 1024-thread CTA: not read twice.
  EXPECT_FALSE(plan_reread_rows(65544, kBf16, kFill).valid());
  EXPECT_FALSE(plan_reread_rows(32772, kF32, kFill).valid());
  for (const std::int64_t n : {16392, 20480, 24000, 28672, 32768, 40000, 49152, 57344, 65536}) {
    const RowLayout layout = plan_reread_rows(n, kBf16, kFill);
    EXPECT_GE(std::int64_t{layout.slice}, n) << n;
    EXPECT_EQ(layout.threads % kWarpThreads, 0) << n;
    EXPECT_LE(std::int64_t{kMaxRowThreads / layout.threads} * n * kBf16,
              std::max<std::int64_t>(kRereadRowBytesPerSm, n * kBf16))
        << n;
  }
}

TEST(RowConfig, EmptyRowsHaveNoLayout) { EXPECT_FALSE(plan<One>(0, kBf16, kMaxClusterCtas).valid()); }

}  // namespace
}  // namespace fusekit::device
