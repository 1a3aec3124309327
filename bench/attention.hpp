#pragma once
// The attention forward ladder: O = softmax(Q·Kᵀ/√D + mask)·V over the seeds' shapes,
// B·S = 16384 tokens and model width 2048 (H = 2048 / D heads), BSHD tensors.
// Rungs: unfused (per head, batched over sequences: cuBLASLt S = Q·Kᵀ, softmax_forward in place,
// cuBLASLt O = P·V; the seeds' "write them out, read them back", B·S² scores of one head at a time)
// portable (fusekit::attention_forward, the FlashAttention-2 split on mma.sync) and hopper (the
// sm_90 kernel: TMA, wgmma, warp-specialized pingpong; only on an sm_90 GPU).
// flops = 4·B·H·S²·D, halved when causal; min_bytes: Q, K, V read once, O written once.
#include <cstdint>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/attention.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit::bench {

inline constexpr std::int64_t kAttentionTokens = 16384;  // B·S
inline constexpr std::int64_t kAttentionModelWidth = 2048;  // H·D

struct AttentionBenchOptions {
  std::int64_t seqlen = 4096;
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

}  // namespace fusekit::bench
