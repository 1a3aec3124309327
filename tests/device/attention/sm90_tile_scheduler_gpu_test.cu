// Host-side checks of the Hopper attention kernel's tile schedule (sm90_tile_scheduler.cuh); they
// run on the CPU, walking each CTA's ids exactly as its producer thread does, and need no GPU:
//  1. every query tile of every (batch, head) pair is handed out, each once (the middle tile of an
//     odd number of query tiles twice under CausalPairs: it pairs with itself);
//  2. CausalPairs gives every CTA the same causal work (Σ over its tiles of the key tiles each
//     sees) to within one pair of tiles, however the L2 groups cut the pairs;
//  3. each CTA's ids increase (the kernel's loop ends at the first id past ids()).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "fusekit/device/attention/sm90_tile_scheduler.cuh"

namespace fusekit {
namespace {

namespace sm90 = device::attention::sm90;

struct Case {
  int m_blocks, heads, batches, group_heads;
  sm90::Order order;
  int grid;
};

// (m_block, head, batch) → times handed out; per CTA, the causal work of its tiles (m_block + 1).
void walk(const Case& c, std::map<std::tuple<int, int, int>, int>& seen, std::vector<long>& work) {
  const sm90::L2GroupedScheduler s{c.m_blocks, c.heads, c.batches, c.group_heads, c.order};
  work.assign(c.grid, 0);
  for (int cta = 0; cta < c.grid; ++cta) {
    int previous = -1;
    for (int id = s.first(c.grid, cta); id < s.ids(); id = s.next(id, c.grid, cta)) {
      ASSERT_GT(id, previous) << "cta " << cta;
      previous = id;
      const sm90::WorkTile w = s.at(id);
      ASSERT_GE(w.m_block, 0);
      ASSERT_LT(w.m_block, c.m_blocks);
      ASSERT_LT(w.head, c.heads);
      ASSERT_LT(w.batch, c.batches);
      ++seen[{w.m_block, w.head, w.batch}];
      work[cta] += w.m_block + 1;
    }
  }
}

TEST(Sm90TileSchedule, EveryTileOnceAndCausalPairsBalanced) {
  const std::vector<Case> cases = {
      {64, 16, 2, 2, sm90::Order::CausalPairs, 132},   // causal S = 8192, D = 128: groups of 2 pairs
      {32, 16, 4, 3, sm90::Order::CausalPairs, 132},   // S = 4096, a short last group
      {63, 8, 2, 16, sm90::Order::CausalPairs, 132},   // odd query tiles: the middle one pairs with itself
      {7, 3, 1, 1, sm90::Order::CausalPairs, 5},        // fewer pairs than CTAs in a round
      {32, 16, 4, 15, sm90::Order::Rounds, 132},        // unmasked S = 4096
      {5, 2, 3, 6, sm90::Order::Rounds, 30},            // one CTA per tile
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.m_blocks << " query tiles, " << c.heads << " heads, " << c.batches
                                    << " batches, groups of " << c.group_heads << ", grid " << c.grid);
    std::map<std::tuple<int, int, int>, int> seen;
    std::vector<long> work;
    walk(c, seen, work);
    const bool paired = c.order == sm90::Order::CausalPairs;
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(c.m_blocks * c.heads * c.batches));
    for (const auto& [tile, times] : seen) {
      const bool self_paired = paired && c.m_blocks % 2 == 1 && std::get<0>(tile) == c.m_blocks / 2;
      EXPECT_EQ(times, self_paired ? 2 : 1) << "m_block " << std::get<0>(tile);
    }
    if (paired) {
      // A pair of tiles m and M − 1 − m does M + 1 key tiles of work (a self-paired middle tile
      // M + 1 as well: it runs twice).
      const long pair_work = c.m_blocks + 1;
      const auto [lo, hi] = std::minmax_element(work.begin(), work.end());
      EXPECT_LE(*hi - *lo, pair_work) << "CTA work between " << *lo << " and " << *hi;
    }
  }
}

}  // namespace
}  // namespace fusekit
