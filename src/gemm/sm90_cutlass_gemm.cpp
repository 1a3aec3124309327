// Host dispatch of the Hopper CUTLASS kernels: which chains are compiled, and which schedule runs.
#include "sm90_cutlass_gemm.hpp"

#include <fmt/format.h>

#include "fusekit/error.hpp"

namespace fusekit::sm90 {

namespace {

using device::sm90::Activation;
using device::sm90::ScaleBiasActParams;

// The scale-bias-activation form's steps, in the order its nodes must come.
enum class Step : std::uint8_t { Scales, Bias, Activation, Clamp, Residual, Quantize };

std::optional<Step> step_of(EpilogueOp op) {
  switch (op) {
    case EpilogueOp::Scale:
    case EpilogueOp::RowScale:
    case EpilogueOp::ColumnScale: return Step::Scales;
    case EpilogueOp::ColumnBias: return Step::Bias;
    case EpilogueOp::Relu:
    case EpilogueOp::GeluTanh:
    case EpilogueOp::GeluErf:
    case EpilogueOp::Silu: return Step::Activation;
    case EpilogueOp::Clamp: return Step::Clamp;
    case EpilogueOp::Residual: return Step::Residual;
    case EpilogueOp::QuantizeE4M3: return Step::Quantize;
    default: return std::nullopt;
  }
}

Activation activation_of(EpilogueOp op) {
  switch (op) {
    case EpilogueOp::Relu: return Activation::Relu;
    case EpilogueOp::GeluTanh: return Activation::GeluTanh;
    case EpilogueOp::GeluErf: return Activation::GeluErf;
    case EpilogueOp::Silu: return Activation::Silu;
    default: return Activation::Identity;
  }
}

}  // namespace

std::optional<ScaleBiasActParams> scale_bias_act_params(const EpilogueSpec& spec) {
  ScaleBiasActParams params;
  std::optional<Step> last;
  bool seen[static_cast<int>(EpilogueOp::StoreAux) + 1] = {};
  for (const auto& node : spec.nodes) {
    const auto step = step_of(node.op);
    // Steps in order, each op once (the scales multiply, so they may come in any order among
    // themselves; a second row scale would square r, which the kernel does not do).
    if (!step || (last && *step < *last) || seen[static_cast<int>(node.op)]) return std::nullopt;
    if (last && *step == *last && *step != Step::Scales) return std::nullopt;
    seen[static_cast<int>(node.op)] = true;
    last = step;
    if (node.op == EpilogueOp::Scale) params.alpha = node.p0;
    // α = 1 multiplies by nothing: without r and c the kernel skips the scales.
    if (*step == Step::Scales && !(node.op == EpilogueOp::Scale && node.p0 == 1.0f)) params.scaled = true;
    if (*step == Step::Activation) params.activation = activation_of(node.op);
    if (node.op == EpilogueOp::Clamp) params.lo = node.p0, params.hi = node.p1;
  }
  return params;
}

std::optional<Chain> match_chain(const EpilogueSpec& spec) {
  if (spec == EpilogueSpec{}) return Chain::Identity;
  if (spec == EpilogueSpec{}.bias().gelu_tanh()) return Chain::BiasGelu;
  if (spec == EpilogueSpec{}.bias().gelu_tanh().residual()) return Chain::BiasGeluResidual;
  if (spec == EpilogueSpec{}.swiglu(kSm90GateBlock)) return Chain::SwiGlu;
  if (spec == EpilogueSpec{}.geglu(kSm90GateBlock)) return Chain::GeGlu;
  if (scale_bias_act_params(spec)) {
    const bool residual = spec.uses(EpilogueOp::Residual);
    if (spec.uses(EpilogueOp::QuantizeE4M3)) return residual ? Chain::ScaleBiasActResidualE4m3 : Chain::ScaleBiasActE4m3;
    return residual ? Chain::ScaleBiasActResidual : Chain::ScaleBiasAct;
  }
  return std::nullopt;
}

std::string_view schedule_blocker(Chain chain, Sm90Schedule schedule) {
  if (schedule == Sm90Schedule::Deferred)
    return chain == Chain::BiasGelu || chain == Chain::BiasGeluResidual ? std::string_view{} : kDeferredChainsOnly;
  if (schedule != Sm90Schedule::Pingpong) return {};
  if (chain == Chain::SwiGlu || chain == Chain::GeGlu) return kGatedScheduleOnly;
  if (is_scale_bias_act(chain)) return kScaleBiasActScheduleOnly;
  return {};
}

ScheduleChoice auto_schedule(Chain chain, std::int64_t m, std::int64_t n, std::int64_t k, int sm_count) {
  if (chain != Chain::BiasGeluResidual) return {Sm90Schedule::Cooperative, "cooperative: the chain's fastest schedule"};
  if (k < kDeferredMinK)
    return {Sm90Schedule::Cooperative,
            fmt::format("cooperative: K = {} < {} leaves the deferred epilogue too little mainloop", k, kDeferredMinK)};
  const std::int64_t tiles = ((m + kDeferredTileM - 1) / kDeferredTileM) * ((n + kDeferredTileN - 1) / kDeferredTileN);
  if (tiles < kDeferredMinTilesPerSm * sm_count)
    return {Sm90Schedule::Cooperative,
            fmt::format("cooperative: {} tiles on {} SMs, under {} an SM, leave the deferred epilogue's last tile exposed",
                        tiles, sm_count, kDeferredMinTilesPerSm)};
  return {Sm90Schedule::Deferred,
          fmt::format("deferred: the residual chain at K = {} >= {} over {} tiles on {} SMs", k, kDeferredMinK, tiles,
                      sm_count)};
}

std::size_t workspace_bytes(Chain chain, Sm90Schedule schedule, const Problem& p) {
  if (is_scale_bias_act(chain)) return workspace_bytes_scale_bias_act(chain, p);
  if (schedule == Sm90Schedule::Deferred) return 0;
  return schedule == Sm90Schedule::Cooperative ? workspace_bytes_cooperative(chain, p)
                                               : workspace_bytes_pingpong(chain, p);
}

void run(Chain chain, Sm90Schedule schedule, const Problem& p, void* workspace, cudaStream_t stream) {
  if (is_scale_bias_act(chain))
    run_scale_bias_act(chain, p, workspace, stream);
  else if (schedule == Sm90Schedule::Deferred)
    run_deferred(chain, p, stream);
  else if (schedule == Sm90Schedule::Cooperative)
    run_cooperative(chain, p, workspace, stream);
  else
    run_pingpong(chain, p, workspace, stream);
}

}  // namespace fusekit::sm90
