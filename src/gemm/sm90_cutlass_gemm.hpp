#pragma once
// Host-side entry to the Hopper CUTLASS kernels (launched by the sm90_cutlass_gemm_*.cu files,
// compiled for sm_90a only). Internal to src/gemm.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "fusekit/device/gemm/scale_bias_act_params.hpp"
#include "fusekit/epilogue.hpp"
#include "fusekit/fused_gemm.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit::sm90 {

// The epilogue chains compiled ahead of time for the Hopper kernel.
enum class Chain : std::uint8_t {
  Identity,              // D = acc
  BiasGelu,              // D = gelu_tanh(acc + bias)
  BiasGeluResidual,      // D = gelu_tanh(acc + bias) + R
  SwiGlu,                // D[i,j] = silu(acc[i,gate(j)]) · acc[i,up(j)], gate block kSm90GateBlock
  GeGlu,                 // D[i,j] = gelu_tanh(acc[i,gate(j)]) · acc[i,up(j)], gate block kSm90GateBlock
  // Every other chain of the form [scale | row_scale | column_scale]… [bias] [relu | gelu_tanh |
  // gelu_erf | silu] [clamp] [residual] [quantize_e4m3] (device/gemm/scale_bias_act_params.hpp):
  ScaleBiasAct,          // D = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi)
  ScaleBiasActResidual,  // D = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi) + R
  // The same with a final quantize_e4m3: D = e4m3(y·s) in rows of 16 bytes, amax = max |y|.
  ScaleBiasActE4m3,
  ScaleBiasActResidualE4m3,
};

inline constexpr std::string_view kGatedScheduleOnly =
    "the Hopper gated kernel runs on the Cooperative schedule only (its 256-column tile holds a gate half and an "
    "up half)";
inline constexpr std::string_view kScaleBiasActScheduleOnly =
    "the Hopper scale-bias-activation kernel is compiled for the Cooperative schedule only";

inline constexpr std::string_view kDeferredChainsOnly =
    "the Hopper deferred-epilogue kernel is compiled for the chains bias → gelu_tanh [→ residual] only";

// Why a compiled chain cannot run on `schedule`, or "" when it can.
std::string_view schedule_blocker(Chain chain, Sm90Schedule schedule);

// Where Auto takes the Deferred schedule: the residual chain, with a mainloop long enough to hide
// its three epilogue warps' work and enough tiles an SM that the last tile, which hides under
// nothing, is a small share. Residual 8192² × K against the Cooperative kernel
// (docs/performance.md): on the H200 before R was loaded a pass ahead (session 46) K = 1024 −34 %,
// 2048 −7 %, 3072 ±0, 4096 +1.4 %, 8192³ +1 to +3 %; on the H100 with it (session 47) K = 1024
// −17 %, 2048 +4 %, 3072 +3 %, 4096³ (3.9 tiles an SM) +0.6 %, 2048×4096×4096 (1.9) −1.5 %.
// The H200 with R a pass ahead (session 49): K = 2048 +2.6 %, 3072 +1.7 %, 16384×4096×4096 +1.6 %,
// 4096³ ±0.1 %, so the bounds are the H100's.
inline constexpr std::int64_t kDeferredMinK = 2048;
inline constexpr std::int64_t kDeferredMinTilesPerSm = 3;
inline constexpr std::int64_t kDeferredTileM = 128, kDeferredTileN = 256;

// The schedule Auto runs `chain` on for an M×N×K problem on `sm_count` SMs, and why.
struct ScheduleChoice {
  Sm90Schedule schedule;
  std::string why;
};
ScheduleChoice auto_schedule(Chain chain, std::int64_t m, std::int64_t n, std::int64_t k, int sm_count);

// The compiled chain that implements `spec` exactly, if any.
std::optional<Chain> match_chain(const EpilogueSpec& spec);

// `spec` as the scale-bias-activation kernel's run-time parameters, if it is of that kernel's form
// (Chain::ScaleBiasAct; a final residual node is Chain::ScaleBiasActResidual's R).
std::optional<device::sm90::ScaleBiasActParams> scale_bias_act_params(const EpilogueSpec& spec);

struct Problem {
  std::int64_t m, n, k;
  DType dtype;  // of A, B, D, bias and residual
  const void* a; std::int64_t lda;
  const void* b; std::int64_t ldb;
  void* d; std::int64_t ldd;
  const void* bias;
  const void* residual; std::int64_t ldr;
  const float* row_scale = nullptr;  // ScaleBiasAct*: [M], or null (1)
  const float* col_scale = nullptr;  // ScaleBiasAct*: [N], or null (1)
  device::sm90::ScaleBiasActParams act{};
  const float* quant_scale = nullptr;  // ScaleBiasAct*E4m3: s, one float
  float* amax = nullptr;               // ScaleBiasAct*E4m3: max |y|, atomically max-ed into; or null
};

// Bytes of device workspace `run` needs for this problem; schedule is not Auto.
std::size_t workspace_bytes(Chain chain, Sm90Schedule schedule, const Problem& p);
void run(Chain chain, Sm90Schedule schedule, const Problem& p, void* workspace, cudaStream_t stream);

// One translation unit per schedule, and one for the scale-bias-activation kernels (Cooperative),
// so that they compile in parallel.
std::size_t workspace_bytes_cooperative(Chain chain, const Problem& p);
void run_cooperative(Chain chain, const Problem& p, void* workspace, cudaStream_t stream);
std::size_t workspace_bytes_pingpong(Chain chain, const Problem& p);
void run_pingpong(Chain chain, const Problem& p, void* workspace, cudaStream_t stream);
std::size_t workspace_bytes_scale_bias_act(Chain chain, const Problem& p);
void run_scale_bias_act(Chain chain, const Problem& p, void* workspace, cudaStream_t stream);
// The deferred-epilogue kernel (Sm90Schedule::Deferred): no workspace.
void run_deferred(Chain chain, const Problem& p, cudaStream_t stream);

// Whether `chain` runs on the scale-bias-activation kernels.
constexpr bool is_scale_bias_act(Chain chain) {
  return chain == Chain::ScaleBiasAct || chain == Chain::ScaleBiasActResidual || chain == Chain::ScaleBiasActE4m3 ||
         chain == Chain::ScaleBiasActResidualE4m3;
}

}  // namespace fusekit::sm90
