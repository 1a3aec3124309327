#pragma once
// What the attention forward kernels read: plain pointers, strides and scalars, filled on the
// host (src/attention/attention.cpp) and passed by value to the kernel.
#include <cstdint>

namespace fusekit::device::attention {

// A window side with no limit. NOTE: sequence lengths stay below it, so diag ± kNoLimit (diag
// within ±2^30) never overflows an int.
inline constexpr int kNoLimit = 1 << 30;

// The head dims with a kernel instantiation.
inline constexpr int kHeadDim64 = 64, kHeadDim128 = 128, kHeadDim256 = 256;

// Query rows per tile of the Hopper kernel (two consumer warpgroups × 64 rows,
// sm90_tile_shape.cuh), which the host needs to count tiles.
inline constexpr int kSm90BlockM = 128;

// Element strides of a [batch, seqlen, heads, dim] tensor (unit innermost stride). With variable
// lengths the batch stride is 0 and tokens are counted from the sequence's offset.
struct TokenStrides {
  std::int64_t batch = 0, token = 0, head = 0;
};

struct FlashForwardParams {
  const void* q = nullptr;  // [batch, seqlen_q, heads_q, head_dim]
  const void* k = nullptr;  // [batch, seqlen_k, heads_kv, head_dim]
  const void* v = nullptr;  // [batch, seqlen_k, heads_kv, head_dim]
  void* o = nullptr;        // like q
  float* lse = nullptr;     // optional: [batch, heads_q, seqlen_q] or [heads_q, total_q]
  TokenStrides q_strides, k_strides, v_strides, o_strides;
  std::int64_t lse_batch_stride = 0, lse_head_stride = 0;
  // Variable lengths: batch + 1 offsets into the packed tokens, or null for fixed lengths.
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
  int seqlen_q = 0, seqlen_k = 0;  // fixed lengths (varlen: seqlen_q is the longest query length)
  int heads_q = 0;
  int group = 1;  // heads_q / heads_kv: query heads sharing one key/value head
  // logit·log2(e) = scale_log2 · s, with s = q·k, or s = tanh(softcap_scale · q·k) with softcap.
  float scale_log2 = 0.0f;
  float softcap_scale = 0.0f;  // scale / cap, or 0 for no soft-cap
  // Key j is visible to query i iff diag − window_left <= j <= diag + window_right, with
  // diag = i + seqlen_k − seqlen_q; causal masks are folded in as window_right = 0.
  int window_left = kNoLimit, window_right = kNoLimit;
};

}  // namespace fusekit::device::attention
