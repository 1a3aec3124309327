#pragma once
// Soft-cap and the visibility mask applied to a tile of scores in registers:
//   s ← tanh(s·scale/cap) (soft-cap, when set), then s ← −∞ for keys outside [first_key(i), last_key(i)].
// Masks align bottom-right (SequenceView): causal is the window's right side at 0, and keys at or
// beyond seqlen_k (the zero rows TMA fills past the end) are never visible.
#include <cute/tensor.hpp>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/device/attention/sequence_view.cuh"
#include "fusekit/device/attention/sm90_softmax.cuh"

namespace fusekit::device::attention::sm90 {

using namespace cute;

// `s` and `coords` are rows views of the score accumulators and of their (row, key) coordinates
// within the tile; the tile starts at query row m0 and key n0.
template <class Scores, class Coords>
__device__ __forceinline__ void soft_cap_and_mask(Scores& s, const Coords& coords, const FlashForwardParams& p,
                                                  const SequenceView& seq, int m0, int n0, int first_row,
                                                  int last_row, int block_n) {
  if (p.softcap_scale != 0.0f) {
#pragma unroll
    for (int i = 0; i < size(s); ++i) s(i) = tanhf(s(i) * p.softcap_scale);
  }
  // Only tiles that cross a row's visible key range pay for the mask (a warpgroup-uniform test
  // over its rows [first_row, last_row]).
  const bool visible_to_all = n0 >= seq.first_key(last_row) && n0 + block_n - 1 <= seq.last_key(first_row);
  if (visible_to_all) return;
#pragma unroll
  for (int r = 0; r < size<0>(s); ++r) {
    const int row = m0 + get<0>(coords(r, 0));
    const int lo = seq.first_key(row), hi = seq.last_key(row);
#pragma unroll
    for (int c = 0; c < size<1>(s); ++c) {
      const int key = n0 + get<1>(coords(r, c));
      if (key < lo || key > hi) s(r, c) = kMinusInf;
    }
  }
}

}  // namespace fusekit::device::attention::sm90
