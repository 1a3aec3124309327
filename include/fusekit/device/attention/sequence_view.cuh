#pragma once
// The token range of one sequence and the keys each of its query rows may see; shared by the
// portable and the Hopper attention forward kernels so that both mask alike.
#include "fusekit/device/attention/attention_params.hpp"

namespace fusekit::device::attention {

// One sequence's token range and the keys a query row may see.
struct SequenceView {
  int q_begin = 0, k_begin = 0;  // offsets of the sequence in packed (varlen) tensors (< 2^30 tokens)
  int seqlen_q = 0, seqlen_k = 0;
  int window_left = kNoLimit, window_right = kNoLimit;

  __device__ int diag(int row) const { return row + seqlen_k - seqlen_q; }
  __device__ int first_key(int row) const { return max(0, diag(row) - window_left); }
  __device__ int last_key(int row) const { return min(seqlen_k - 1, diag(row) + window_right); }
};

// Every sequence of a batch of fixed lengths. NOTE: made of kernel parameters alone, so the
// compiler may read its fields again from the parameter bank where it would otherwise keep them
// in registers across a mainloop (the Hopper kernel, which takes fixed lengths only).
__device__ __forceinline__ SequenceView fixed_sequence_view(const FlashForwardParams& p) {
  SequenceView s;
  s.seqlen_q = p.seqlen_q;
  s.seqlen_k = p.seqlen_k;
  s.window_left = p.window_left;
  s.window_right = p.window_right;
  return s;
}

__device__ __forceinline__ SequenceView sequence_view(const FlashForwardParams& p, int batch) {
  SequenceView s = fixed_sequence_view(p);
  if (p.cu_seqlens_q != nullptr) {
    s.q_begin = p.cu_seqlens_q[batch];
    s.k_begin = p.cu_seqlens_k[batch];
    s.seqlen_q = p.cu_seqlens_q[batch + 1] - s.q_begin;
    s.seqlen_k = p.cu_seqlens_k[batch + 1] - s.k_begin;
  }
  return s;
}

}  // namespace fusekit::device::attention
