#pragma once
// Which query tiles a CTA of the Hopper attention forward kernel works on, and which key tiles
// each query tile needs.
//
// Persistent: the launch gives min(units, SMs) CTAs (one per SM: the register split admits one
// 384-thread CTA). The producer thread walks the CTA's tiles and hands each id to the consumers
// through shared memory (sm90_mainloop.cuh), so only it runs this schedule.
//
// Ids are ordered for L2: the (batch, head) pairs are cut into groups of `group_heads`
// consecutive query heads whose K and V fit in about an eighth of the L2 (the host sizes them:
// sm90_flash_forward_launch.cuh), and a group's ids all come before the next group's. The CTAs
// running at one time then read the K and V of one or two groups, each key tile from DRAM about
// once and from L2 by every query tile of its head. (Heads fastest over the whole grid, the first
// version, had 132 CTAs stream 64 different heads' K and V, 128 MB at D = 128, S = 4096, through
// the 50 MB L2: each key tile came from DRAM about 16 times by the traffic arithmetic.) Within a
// group the heads run fastest (the heads of one GQA group, adjacent, read the same K and V at the
// same time).
//
// Order::Rounds (tiles of equal length, and sliding windows): ids are query tiles, last to first
// within a group (longest first), taken round by round, gridDim.x per round: in round r CTA c
// takes id r·gridDim.x + c, or r·gridDim.x + gridDim.x − 1 − c when r is odd (serpentine), so the
// CTA given the longest tile of one round gets the shortest of the next.
//
// Order::CausalPairs (causal masks): a query tile's length grows by one key tile per query tile,
// so query tiles m and M − 1 − m together always take M + 1 (plus any prefix of keys): ids come in
// such pairs, and CTA c takes pairs c, c + gridDim.x, … — balanced to within one pair however the
// L2 groups cut the tiles. (Rounds of single tiles restart the lengths at every group boundary: up
// to 1.7× unbalanced by simulation; with one group, as before session 4, balanced but every head's
// K and V in flight at once.) With M odd, the middle tile pairs with itself and runs twice,
// writing the same O and LSE.
#include "fusekit/device/attention/sequence_view.cuh"

namespace fusekit::device::attention::sm90 {

struct WorkTile {
  int m_block = 0, head = 0, batch = 0;
};

// Key tiles [begin, end) that some row of a query tile sees; tiles outside are fully masked.
struct KeyTiles {
  int begin = 0, end = 0;
  __device__ int count() const { return end - begin; }
};

__device__ __forceinline__ KeyTiles key_tiles(const SequenceView& seq, int first_row, int last_row, int block_n) {
  const int first_key = seq.first_key(first_row), last_key = seq.last_key(last_row);
  KeyTiles t;
  t.begin = first_key / block_n;
  t.end = last_key >= first_key ? last_key / block_n + 1 : t.begin;
  return t;
}

enum class Order : int { Rounds, CausalPairs };

struct L2GroupedScheduler {
  int m_blocks = 0, heads = 0, batches = 0;
  int group_heads = 1;  // consecutive (batch, head) pairs per group, ≥ 1
  Order order = Order::Rounds;

  // Ids (the end sentinel: any id ≥ ids()).
  __host__ __device__ int ids() const { return order == Order::CausalPairs ? 2 * pair_units() * pairs() : tiles(); }
  __host__ __device__ int tiles() const { return m_blocks * pairs(); }
  // The CTAs worth launching: one per tile, or per pair of tiles.
  __host__ __device__ int units() const { return order == Order::CausalPairs ? pair_units() * pairs() : tiles(); }
  // The first id of CTA `cta` of `grid`, and the id after `id` for it (producer thread; the host
  // tests run the same code). Rounds: the rounds are `grid` ids wide, so an id tells its round.
  // Pairs: the second of a pair, then the first of the CTA's next pair.
  __host__ __device__ int first(int grid, int cta) const {
    return order == Order::CausalPairs ? 2 * cta : in_round(0, grid, cta);
  }
  __host__ __device__ int next(int id, int grid, int cta) const {
    if (order == Order::CausalPairs) return id % 2 == 0 ? id + 1 : 2 * (id / 2 + grid);
    return in_round(id / grid + 1, grid, cta);
  }
  __host__ __device__ WorkTile at(int id) const {
    const bool paired = order == Order::CausalPairs;
    const int unit = paired ? id / 2 : id;
    const int group_units = (paired ? pair_units() : m_blocks) * group_heads;
    const int group = unit / group_units;
    const int in_group = unit - group * group_units;
    const int first_pair = group * group_heads;
    const int group_pairs = group_heads < pairs() - first_pair ? group_heads : pairs() - first_pair;  // the last may be short
    const int pair = first_pair + in_group % group_pairs;
    const int step = in_group / group_pairs;  // query tile (Rounds) or pair of them (CausalPairs) from the last
    WorkTile w;
    w.m_block = paired && id % 2 == 1 ? step : m_blocks - 1 - step;
    w.head = pair % heads;
    w.batch = pair / heads;
    return w;
  }

 private:
  __host__ __device__ int pairs() const { return heads * batches; }
  __host__ __device__ int pair_units() const { return (m_blocks + 1) / 2; }
  __host__ __device__ static int in_round(int round, int grid, int cta) {
    return round * grid + (round % 2 == 0 ? cta : grid - 1 - cta);
  }
};

}  // namespace fusekit::device::attention::sm90
