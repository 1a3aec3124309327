// Host-side checks of the register-fragment layouts the Hopper attention kernel relies on; they
// run on the CPU (CuTe layouts are host code) and need no GPU:
//  1. rows view: value (r, c) of consumer thread t in the S accumulator lies in query row
//     64·(t/128) + 16·(warp in warpgroup) + lane/4 + 8r, and the quad (lanes 4k … 4k+3) holds
//     every column of its rows exactly once (the softmax reduces rows with 2 shuffles);
//  2. O's rows view has S's rows (α of row r rescales O's row r);
//  3. P·V's A fragment, in register order, holds the (row, key) of S's accumulator in register
//     order (P is S rounded element by element, no shuffles).
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "fusekit/device/attention/sm90_softmax.cuh"
#include "fusekit/device/attention/sm90_tile_shape.cuh"

namespace fusekit {
namespace {

namespace sm90 = device::attention::sm90;
using namespace cute;

constexpr int kWarpThreads = 32, kQuad = 4, kRowsPerWarp = 16, kHalfRows = 8;

template <int kHeadDim>
void check_fragments() {
  using Tile = sm90::Sm90ForwardShape<cutlass::bfloat16_t, kHeadDim>;
  using BlockM = typename Tile::BlockM;
  using BlockN = typename Tile::BlockN;
  using HeadDim = typename Tile::HeadDim;
  typename Tile::TiledMmaQK mma_qk;
  typename Tile::TiledMmaPV mma_pv;
  const int consumer_threads = sm90::kConsumers * sm90::kWarpgroupThreads;
  for (int quad0 = 0; quad0 < consumer_threads; quad0 += kQuad) {
    std::set<std::pair<int, int>> quad_cells;
    for (int t = quad0; t < quad0 + kQuad; ++t) {
      auto s = mma_qk.get_thread_slice(t).partition_C(make_identity_tensor(Shape<BlockM, BlockN>{}));
      auto o = mma_pv.get_thread_slice(t).partition_C(make_identity_tensor(Shape<BlockM, HeadDim>{}));
      auto p = mma_pv.get_thread_slice(t).partition_A(make_identity_tensor(Shape<BlockM, BlockN>{}));
      auto s_rows = sm90::rows_view(s);
      auto o_rows = sm90::rows_view(o);
      ASSERT_EQ(size<0>(s_rows), 2);
      const int warp_in_group = (t % sm90::kWarpgroupThreads) / kWarpThreads, lane = t % kWarpThreads;
      for (int r = 0; r < size<0>(s_rows); ++r) {
        const int want_row = sm90::kWgmmaRows * (t / sm90::kWarpgroupThreads) + kRowsPerWarp * warp_in_group +
                             lane / kQuad + kHalfRows * r;
        for (int c = 0; c < size<1>(s_rows); ++c) {
          ASSERT_EQ(get<0>(s_rows(r, c)), want_row) << "S thread " << t << " row " << r << " column " << c;
          EXPECT_TRUE(quad_cells.insert({get<0>(s_rows(r, c)), get<1>(s_rows(r, c))}).second)
              << "S cell held twice in quad " << quad0;
        }
        for (int c = 0; c < size<1>(o_rows); ++c)
          ASSERT_EQ(get<0>(o_rows(r, c)), want_row) << "O thread " << t << " row " << r << " column " << c;
      }
      ASSERT_EQ(size(p), size(s));
      for (int i = 0; i < size(s); ++i) {
        ASSERT_EQ(get<0>(p(i)), get<0>(s(i))) << "P row, thread " << t << " value " << i;
        ASSERT_EQ(get<1>(p(i)), get<1>(s(i))) << "P key, thread " << t << " value " << i;
      }
    }
    // The quad covers its two rows × every key column exactly once.
    EXPECT_EQ(static_cast<int>(quad_cells.size()), 2 * Tile::kBlockN) << "quad " << quad0;
  }
}

TEST(Sm90AttentionFragments, HeadDim64) { check_fragments<64>(); }
TEST(Sm90AttentionFragments, HeadDim128) { check_fragments<128>(); }
TEST(Sm90AttentionFragments, HeadDim256) { check_fragments<256>(); }

}  // namespace
}  // namespace fusekit
