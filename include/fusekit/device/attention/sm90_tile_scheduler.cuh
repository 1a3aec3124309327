#pragma once
// Which query tiles a CTA of the Hopper attention forward kernel works on, and which key tiles
// each query tile needs.
//
// Persistent and static: the launch gives min(tiles, SMs) CTAs (one per SM: the register split
// admits one 384-thread CTA), and the CTAs take the tile ids round by round, gridDim.x per round:
// in round r CTA c takes id r·gridDim.x + c, or r·gridDim.x + gridDim.x − 1 − c when r is odd
// (serpentine), so that the CTA given the longest tile of one round gets the shortest of the
// next. At any time the CTAs work on about gridDim.x consecutive tile ids.
//
// Tile ids are ordered for L2: the (batch, head) pairs are cut into groups of `group_heads`
// consecutive query heads whose K and V fit in about an eighth of the L2 (the host sizes them;
// under a causal or window mask it makes one group, for balance: sm90_flash_forward_launch.cuh), and a
// group's tiles all come before the next group's. The CTAs running at one time then read the K
// and V of one or two groups, each key tile from DRAM about once and from L2 by every query
// tile of its head. (Heads fastest over the whole grid, the first version, had 132 CTAs stream
// 64 different heads' K and V, 128 MB at D = 128, S = 4096, through the 50 MB L2: each key tile
// came from DRAM about 16 times by the traffic arithmetic, 2 GB for 128 MB.) Within a group, query tiles run from the last to the first
// (longest first: under a causal mask the last query tiles see the most keys, so the short ones
// fill the tail) with the group's heads fastest (the heads of one GQA group, adjacent, read the
// same K and V at the same time). A grid of one CTA per tile runs the same code with one tile per
// CTA.
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

struct L2GroupedScheduler {
  int m_blocks = 0, heads = 0, batches = 0;
  int group_heads = 1;  // consecutive (batch, head) pairs per group, ≥ 1

  __host__ __device__ int tiles() const { return m_blocks * heads * batches; }
  __device__ int first() const { return in_round(0); }
  // The rounds are gridDim.x ids wide, so a tile's id tells its round.
  __device__ int next(int tile) const { return in_round(tile / static_cast<int>(gridDim.x) + 1); }
  __device__ WorkTile at(int tile) const {
    const int group_tiles = m_blocks * group_heads;
    const int group = tile / group_tiles;
    const int in_group = tile - group * group_tiles;
    const int first_pair = group * group_heads;
    const int pairs = min(group_heads, heads * batches - first_pair);  // the last group may be short
    const int pair = first_pair + in_group % pairs;
    WorkTile w;
    w.m_block = m_blocks - 1 - in_group / pairs;
    w.head = pair % heads;
    w.batch = pair / heads;
    return w;
  }

 private:
  __device__ static int in_round(int round) {
    const int grid = static_cast<int>(gridDim.x), cta = static_cast<int>(blockIdx.x);
    return round * grid + (round % 2 == 0 ? cta : grid - 1 - cta);
  }
};

}  // namespace fusekit::device::attention::sm90
