#pragma once
// The attention forward ladder: O = softmax(Q·Kᵀ/√D + mask)·V over the seeds' shapes,
// B·S = 16384 tokens and model width 2048 (H = 2048 / D heads), BSHD tensors.
// Rungs: unfused (per head, batched over sequences: cuBLASLt S = Q·Kᵀ, softmax_forward in place,
// cuBLASLt O = P·V; the seeds' "write them out, read them back", B·S² scores of one head at a time)
// portable (fusekit::attention_forward, the FlashAttention-2 split on mma.sync) and hopper (the
// sm_90 kernel: TMA, wgmma, warp-specialized pingpong; only on an sm_90 GPU).
// flops = 4·B·H·S²·D, halved when causal; min_bytes: Q, K, V read once, O written once.
// The varlen ladder: the same 16384 tokens as sequences of mixed lengths (kVarlenLengths) packed
// into [tokens, H, D]. Rungs: per_sequence (one fixed-length call per sequence on the best kernel
// for it, what a caller without variable-length support launches) and varlen (one call with
// cumulative offsets, fusekit's portable kernel); flops = Σ 4·H·L²·D, halved when causal.
#include <array>
#include <cstdint>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/attention.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit::bench {

inline constexpr std::int64_t kAttentionTokens = 16384;  // B·S
inline constexpr std::int64_t kAttentionModelWidth = 2048;  // H·D

// The varlen ladder's sequence lengths: 16384 tokens, long and short, odd lengths among them.
inline constexpr std::array<std::int64_t, 9> kVarlenLengths = {4096, 2048, 3072, 1024, 1536, 512, 2500, 1000, 596};

struct AttentionBenchOptions {
  std::int64_t seqlen = 4096;  // fixed-length ladder only
  std::int64_t head_dim = 128;
  Causal causal = Causal::No;
  DType dtype = DType::BF16;
  CheckScope scope = CheckScope::SampledRows;
  std::uint64_t seed = 0;  // 0: draw a fresh seed
};

// Sequence lengths 512 … 16384 (powers of two).
std::vector<std::int64_t> attention_sweep_seqlens();

// 4·B·H·Sq·Sk·D, halved when causal (Sq = Sk).
double attention_flops(std::int64_t batch, std::int64_t heads, std::int64_t seqlen, std::int64_t head_dim,
                       Causal causal);

LadderRun make_attention_ladder(const AttentionBenchOptions& options);

// Σ over kVarlenLengths of 4·H·L²·D, halved when causal.
double attention_varlen_flops(std::int64_t heads, std::int64_t head_dim, Causal causal);

// The varlen ladder (options.seqlen is not used).
LadderRun make_attention_varlen_ladder(const AttentionBenchOptions& options);

}  // namespace fusekit::bench
