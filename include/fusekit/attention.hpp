#pragma once
// Fused attention forward: the scores exist only as a tile on chip, never in memory.
//   O = softmax(mask(softcap(scale·Q·Kᵀ)))·V,  LSE = log Σ_j exp(mask(softcap(scale·Q·Kᵀ)))
// Semantics are those of the CPU reference (fusekit/reference/attention.hpp): masks aligned
// bottom-right (diag(i) = i + Sk − Sq), query head h reads key/value head h / (Hq / Hkv), soft-cap
// s → cap·tanh(s/cap) before masking, and a query that sees no key gets O = 0 and LSE = −∞.
//
// Tensors (bf16 or f16, all alike; head dim 64, 128 or 256; unit innermost stride; 16-byte aligned
// base and strides; any other strides, so BSHD and BHSD storage both work):
//   fixed lengths:     q, o [B, Sq, Hq, D]     k, v [B, Sk, Hkv, D]    lse f32 [B, Hq, Sq]
//   variable lengths:  q, o [total_q, Hq, D]   k, v [total_k, Hkv, D]  lse f32 [Hq, total_q]
// Two kernels (AttentionBackend): the portable mma.sync kernel (sm_80 and newer, every feature)
// and the Hopper kernel (sm_90: TMA, wgmma, warp-specialized; fixed lengths only for now; see
// docs/hopper_attention.md). plan_attention_forward says which one runs and why.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "fusekit/reference/attention.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit {

using reference::Causal;
using reference::kUnboundedWindow;
using reference::Window;

// Packed sequences of different lengths: sequence b holds tokens [cu_seqlens[b], cu_seqlens[b+1]).
// NOTE: the offsets themselves are the caller's promise (non-decreasing from 0, the last at most
// the packed tensors' tokens, every query length at most max_seqlen_q), as in FlashAttention:
// checking them would copy them to the host and synchronize. The pointers are checked.
struct VarlenBatch {
  const std::int32_t* cu_seqlens_q = nullptr;  // device memory, sequences + 1 non-decreasing offsets from 0
  const std::int32_t* cu_seqlens_k = nullptr;  // device memory, sequences + 1 offsets
  std::int64_t sequences = 0;
  std::int64_t max_seqlen_q = 0;  // at least every query length (sizes the grid)
};

enum class AttentionBackend : std::uint8_t {
  Auto,      // the Hopper kernel on sm_90 where it covers the arguments, the portable kernel elsewhere
  Portable,  // mma.sync, FlashAttention-2 work split: sm_80 and newer, every feature
  Sm90,      // TMA + wgmma, producer and two pingpong consumer warpgroups: sm_90, fixed lengths
};
std::string_view attention_backend_name(AttentionBackend b);

struct AttentionForwardArgs {
  TensorView q, k, v;
  TensorView o;
  TensorView lse;               // optional (empty view: not written)
  std::optional<float> scale;   // default 1/sqrt(D)
  Causal causal = Causal::No;
  Window window;                // sliding window in keys around the diagonal; unbounded by default
  std::optional<float> softcap; // cap > 0; default none
  std::optional<VarlenBatch> varlen;
  AttentionBackend backend = AttentionBackend::Auto;  // requested kernel
  // SMs the Hopper kernel's persistent grid leaves free (e.g. for a concurrent communication
  // kernel): it takes at most SMs − sm_margin CTAs. 0 … SMs − 1 where the Hopper kernel runs.
  // The portable kernel's grid (a CTA per query tile) cannot leave SMs free: backend Portable
  // takes only 0, and Auto, where it picks the portable kernel, runs without the margin, so that
  // one call serves every GPU.
  int sm_margin = 0;
};

struct AttentionReport {
  AttentionBackend backend = AttentionBackend::Auto;  // the kernel that runs
  std::string reason;                                 // why this one
};

// Checks every argument, then says which kernel attention_forward would run and why (no
// launch). A requested backend that cannot run the arguments is ErrorKind::Unsupported, naming
// the reason.
AttentionReport plan_attention_forward(const AttentionForwardArgs& args);

// Checks every argument (InvalidArgument naming it, or Unsupported) before any launch, then runs
// the planned kernel.
AttentionReport attention_forward(const AttentionForwardArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
