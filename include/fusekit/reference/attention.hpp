#pragma once
// CPU reference (double precision) of the attention forward pass:
//   O = softmax(mask(softcap(scale·Q·Kᵀ)))·V,  LSE = log Σ_j exp(mask(softcap(scale·Q·Kᵀ)))
// for MHA / GQA / MQA, causal and sliding-window masks, Sq ≠ Sk, and variable-length batches.
//
// Host layout (packed "BSHD", no padding), all row-major flat vectors of doubles:
//   q   [total_q, heads_q,  head_dim]     token t of sequence b is row cu_seqlens_q[b] + t
//   k   [total_k, heads_kv, head_dim]
//   v   [total_k, heads_kv, head_dim_v]
//   o   [total_q, heads_q,  head_dim_v]
//   lse [heads_q, total_q]                natural log
// With fixed lengths (cu_seqlens empty) sequence b holds tokens [b·seqlen_q, (b+1)·seqlen_q),
// i.e. the usual [batch, seqlen, heads, dim] tensor.
//
// Query head h reads key/value head h / (heads_q / heads_kv).
// Masks are aligned bottom-right per sequence: with diag(i) = i + Sk − Sq, query i sees key j iff
//   causal → j <= diag(i),  left ≥ 0 → j >= diag(i) − left,  right ≥ 0 → j <= diag(i) + right.
// A query that sees no key gets O = 0 and LSE = −∞.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fusekit/reference/softmax.hpp"

namespace fusekit::reference {

inline constexpr std::int64_t kUnboundedWindow = -1;

// Sliding window around the bottom-right-aligned diagonal, in keys; kUnboundedWindow = no limit.
struct Window {
  std::int64_t left = kUnboundedWindow;
  std::int64_t right = kUnboundedWindow;
};

struct AttentionProblem {
  std::int64_t batch = 1;  // ignored when cu_seqlens_q is given (then it is its size − 1)
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;  // divides heads_q: heads_q (MHA), fewer (GQA), 1 (MQA)
  std::int64_t seqlen_q = 0;  // per sequence, when cu_seqlens_q is empty
  std::int64_t seqlen_k = 0;  // per sequence, when cu_seqlens_k is empty
  std::int64_t head_dim = 0;
  std::optional<std::int64_t> head_dim_v;  // default: head_dim
  // Variable lengths: batch + 1 non-decreasing offsets from 0 into the packed tokens; give both
  // or neither.
  std::vector<std::int64_t> cu_seqlens_q;
  std::vector<std::int64_t> cu_seqlens_k;
  std::optional<double> scale;  // default: 1/sqrt(head_dim)
  Causal causal = Causal::No;
  Window window;
  std::optional<double> softcap;  // s -> cap·tanh(s/cap), before masking; default: none

  std::int64_t sequences() const;
  std::int64_t value_dim() const { return head_dim_v.value_or(head_dim); }
  double softmax_scale() const;
  // [first token, one past the last token] of sequence b in the packed q (or k/v) rows.
  std::int64_t query_begin(std::int64_t b) const;
  std::int64_t query_end(std::int64_t b) const;
  std::int64_t key_begin(std::int64_t b) const;
  std::int64_t key_end(std::int64_t b) const;
  std::int64_t total_q() const { return query_begin(sequences()); }
  std::int64_t total_k() const { return key_begin(sequences()); }
};

// Whether query i of a sequence with seqlen_q queries sees key j of its seqlen_k keys.
bool key_visible(const AttentionProblem& p, std::int64_t i, std::int64_t j, std::int64_t seqlen_q,
                 std::int64_t seqlen_k);

struct AttentionResult {
  std::vector<double> o;    // [total_q, heads_q, head_dim_v]
  std::vector<double> lse;  // [heads_q, total_q]
};

// Checks the sizes of q, k, v against `p` (throws std::invalid_argument) and computes O, LSE.
AttentionResult attention_forward(const AttentionProblem& p, std::span<const double> q,
                                  std::span<const double> k, std::span<const double> v);

}  // namespace fusekit::reference
