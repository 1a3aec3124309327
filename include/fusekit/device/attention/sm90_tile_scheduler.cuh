#pragma once
// Which query tiles a CTA of the Hopper attention forward kernel works on, and which key tiles
// each query tile needs.
//
// Persistent and static: the launch gives min(tiles, SMs) CTAs (one per SM: the register split
// admits one 384-thread CTA), and CTA c takes tiles c, c + gridDim.x, c + 2·gridDim.x, …. Tile
// ids run over query tiles from the last to the first (longest first: under a causal mask the
// last query tiles see the most keys, so the short ones fill the tail), with the query heads
// fastest (the heads of one GQA group read the same K and V while it is in L2), then sequences.
// A grid of one CTA per tile runs the same code with one tile per CTA.
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

struct LongestFirstScheduler {
  int m_blocks = 0, heads = 0, batches = 0;

  __host__ __device__ int tiles() const { return m_blocks * heads * batches; }
  __device__ int first() const { return static_cast<int>(blockIdx.x); }
  __device__ int next(int tile) const { return tile + static_cast<int>(gridDim.x); }
  __device__ WorkTile at(int tile) const {
    const int per_block = heads * batches;
    WorkTile w;
    w.m_block = m_blocks - 1 - tile / per_block;
    w.head = tile % per_block % heads;
    w.batch = tile % per_block / heads;
    return w;
  }
};

}  // namespace fusekit::device::attention::sm90
