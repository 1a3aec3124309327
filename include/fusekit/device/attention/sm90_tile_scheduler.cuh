#pragma once
// Which query tile a CTA of the Hopper attention forward kernel works on, and which key tiles
// that query tile needs.
//
// First version: one CTA per (query tile, query head, sequence), longest first: under a causal
// mask the last query tiles see the most keys, so they start in the first wave and the short
// ones fill the tail. The persistent scheduler (docs/hopper_attention.md, step 3) keeps this
// interface: `first()` and `next()` over the same tiles, one CTA per SM.
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

// Grid: (query tiles, query heads, sequences).
struct LongestFirstScheduler {
  __device__ static WorkTile first() {
    WorkTile w;
    w.m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
    w.head = static_cast<int>(blockIdx.y);
    w.batch = static_cast<int>(blockIdx.z);
    return w;
  }
};

}  // namespace fusekit::device::attention::sm90
