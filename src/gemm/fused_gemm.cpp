// Level-2 dispatch: validate once, then run the chain on the backend that implements it best.
#include "fusekit/fused_gemm.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/gemm.hpp"
#include "fusekit/runtime.hpp"
#include "portable_gemm.hpp"
#include "sm90_cutlass_gemm.hpp"

namespace fusekit {

namespace {

constexpr std::size_t kTmaAlignmentBytes = 16;

// The cuBLASLt epilogue computing `spec` exactly, if there is one.
std::optional<Epilogue> cublaslt_epilogue(const EpilogueSpec& spec) {
  struct Match {
    EpilogueSpec spec;
    Epilogue epilogue;
  };
  static const Match kMatches[] = {
      {EpilogueSpec{}, Epilogue::Default},
      {EpilogueSpec{}.relu(), Epilogue::Relu},
      {EpilogueSpec{}.bias(), Epilogue::Bias},
      {EpilogueSpec{}.bias().relu(), Epilogue::ReluBias},
      {EpilogueSpec{}.gelu_tanh(), Epilogue::Gelu},
      {EpilogueSpec{}.bias().gelu_tanh(), Epilogue::GeluBias},
      {EpilogueSpec{}.store_aux().gelu_tanh(), Epilogue::GeluAux},
      {EpilogueSpec{}.bias().store_aux().gelu_tanh(), Epilogue::GeluAuxBias},
  };
  for (const auto& m : kMatches)
    if (m.spec == spec) return m.epilogue;
  return std::nullopt;
}

// Why the Hopper kernel's TMA cannot take `t`, or "": a 16-byte aligned base and row stride, and
// rows of whole 16-byte units (CUTLASS's can_implement refuses a partial one, though TMA would clip it).
std::string tma_blocker(const char* name, const TensorView& t) {
  if (t.empty()) return {};
  const auto bytes = static_cast<std::int64_t>(kTmaAlignmentBytes);
  const auto element = static_cast<std::int64_t>(t.element_size());
  if (reinterpret_cast<std::uintptr_t>(t.data) % kTmaAlignmentBytes != 0)
    return fmt::format("the Hopper kernel's TMA needs {} 16-byte aligned", name);
  if (t.rank < 2) return {};
  if (t.strides[0] * element % bytes != 0)
    return fmt::format("the Hopper kernel's TMA needs {}'s row stride in multiples of 16 bytes, not {} elements", name,
                       t.strides[0]);
  if (t.shape[1] * element % bytes != 0)
    return fmt::format("the Hopper kernel's TMA needs {}'s rows in multiples of 16 bytes ({} elements), not {}", name,
                       bytes / element, t.shape[1]);
  return {};
}

struct Shape {
  std::int64_t m, n, k;
};

// Every check of the arguments that needs no device: plan_fused_gemm's and fused_gemm's.
Shape validate(const FusedGemmArgs& g, GemmBackend requested) {
  require(requested == GemmBackend::Auto || requested == GemmBackend::CublasLt || requested == GemmBackend::Sm90 ||
              requested == GemmBackend::Portable,
          "backend", "Auto, CublasLt, Sm90 or Portable", static_cast<int>(requested));
  for (auto [name, t] : {std::pair{"a", &g.a}, {"b", &g.b}, {"d", &g.d}}) {
    check::structure(name, *t);
    check::rank(name, *t, 2);
  }
  check::dtype("a", g.a, {DType::BF16, DType::F16});
  require(g.b.dtype == g.a.dtype, "b dtype", dtype_name(g.a.dtype), dtype_name(g.b.dtype));
  // D is e4m3 after a final quantize node (validate() keeps it last), else a's dtype.
  const DType d_type = g.epilogue.uses(EpilogueOp::QuantizeE4M3) ? DType::E4M3 : g.a.dtype;
  require(g.d.dtype == d_type, "d dtype", dtype_name(d_type), dtype_name(g.d.dtype));
  const std::int64_t m = g.a.shape[0], k = g.a.shape[1], n = g.b.shape[0];
  require(g.b.shape[1] == k, "b shape", fmt::format("[N, {}] (K of a)", k), g.b.describe());
  require(m > 0 && n > 0 && k > 0, "M, N, K", "all positive", fmt::format("{}, {}, {}", m, n, k));
  require(g.schedule == Sm90Schedule::Auto || g.schedule == Sm90Schedule::Cooperative ||
              g.schedule == Sm90Schedule::Pingpong || g.schedule == Sm90Schedule::Deferred,
          "schedule", "Auto, Cooperative, Pingpong or Deferred", static_cast<int>(g.schedule));
  validate(g.epilogue, g.tensors, m, n);
  // After the chain's own checks: d's width follows from them (a gated node halves it).
  check::shape("d", g.d, {m, epilogue_output_columns(g.epilogue, n)});
  for (auto [name, t] : {std::pair{"epilogue bias", &g.tensors.bias}, {"epilogue residual", &g.tensors.residual},
                         {"epilogue source", &g.tensors.source}, {"epilogue aux", &g.tensors.aux}})
    if (!t->empty()) require(t->dtype == g.a.dtype, fmt::format("{} dtype", name), dtype_name(g.a.dtype), dtype_name(t->dtype));
  // d is written tile by tile while a and b are still read; an element of d is written after its
  // own residual and source elements are read: in place through identical views only.
  check::disjoint("d", g.d, "a", g.a, check::InPlace::Forbidden);
  check::disjoint("d", g.d, "b", g.b, check::InPlace::Forbidden);
  check::disjoint("d", g.d, "epilogue residual", g.tensors.residual, check::InPlace::Allowed);
  check::disjoint("d", g.d, "epilogue source", g.tensors.source, check::InPlace::Allowed);
  validate_disjoint(g.tensors, "d", g.d, {{"a", &g.a}, {"b", &g.b}});
  return {m, n, k};
}

// Where the operands lie, a device query each: fused_gemm's only (a plan reads no memory).
void check_on_device(const FusedGemmArgs& g) {
  for (auto [name, t] : {std::pair{"a", &g.a}, {"b", &g.b}, {"d", &g.d}, {"epilogue bias", &g.tensors.bias},
                         {"epilogue residual", &g.tensors.residual}, {"epilogue source", &g.tensors.source},
                         {"epilogue aux", &g.tensors.aux}, {"epilogue row_scale", &g.tensors.row_scale},
                         {"epilogue col_scale", &g.tensors.col_scale}})
    if (!t->empty()) check::on_current_device(name, *t);
  for (auto [name, ptr] : {std::pair<const char*, const float*>{"epilogue quant_scale", g.tensors.quant_scale},
                           {"epilogue amax", g.tensors.amax}})
    if (ptr != nullptr) check::on_current_device(name, ptr);
}

// The backend for validated arguments, and why.
FusedGemmReport choose_backend(const FusedGemmArgs& g, GemmBackend requested) {
  const auto lt = cublaslt_epilogue(g.epilogue);
  // Why cuBLASLt cannot run the chain on these operands, or "".
  const std::string lt_why = [&]() -> std::string {
    if (!lt) return fmt::format("cuBLASLt lacks the chain {}", g.epilogue.to_string());
    if (aux_role(*lt) == AuxRole::PreactOutput && g.tensors.aux.strides[0] % kPreactAuxLdMultiple != 0)
      return fmt::format("cuBLASLt's {} needs aux rows of a multiple of {} elements, not {}", epilogue_name(*lt),
                         kPreactAuxLdMultiple, g.tensors.aux.strides[0]);
    return {};
  }();
  const auto chain = sm90::match_chain(g.epilogue);
  const bool hopper = device_count() > 0 && current_device_info().cc_major == 9;
  const std::string tma_why = [&] {
    for (auto [name, t] : {std::pair{"a", &g.a}, {"b", &g.b}, {"d", &g.d}, {"bias", &g.tensors.bias},
                           {"residual", &g.tensors.residual}})
      if (auto why = tma_blocker(name, *t); !why.empty()) return why;
    return std::string{};
  }();
  // NOTE: what the request itself rules out first (extents, chain, schedule), then the device.
  auto sm90_blocker = [&]() -> std::string {
    if (g.a.shape[0] > INT32_MAX || g.b.shape[0] > INT32_MAX || g.a.shape[1] > INT32_MAX)
      return "the Hopper kernel takes M, N and K as 32-bit integers";
    if (!chain) return fmt::format("no Hopper kernel is compiled for the chain {}", g.epilogue.to_string());
    if (auto why = sm90::schedule_blocker(*chain, g.schedule); !why.empty()) return std::string(why);
    if (!hopper) return "the Hopper kernel needs an sm_90 GPU";
    if (!tma_why.empty()) return tma_why;
    return {};
  };
  // The schedule the Hopper kernel runs, and why (only once it can run).
  const auto sm90_report = [&](std::string why) -> FusedGemmReport {
    if (g.schedule != Sm90Schedule::Auto) return {GemmBackend::Sm90, fmt::format("{}; schedule requested", why), g.schedule};
    auto choice = sm90::auto_schedule(*chain, g.a.shape[0], g.b.shape[0], g.a.shape[1], current_device_info().sm_count);
    return {GemmBackend::Sm90, fmt::format("{}; {}", why, choice.why), choice.schedule};
  };
  switch (requested) {
    case GemmBackend::CublasLt:
      if (!lt)
        throw Error(ErrorKind::Unsupported,
                    fmt::format("cuBLASLt has no epilogue for the chain {}", g.epilogue.to_string()));
      if (!lt_why.empty()) throw Error(ErrorKind::Unsupported, lt_why);
      return {GemmBackend::CublasLt, fmt::format("requested; cuBLASLt epilogue {}", epilogue_name(*lt))};
    case GemmBackend::Sm90:
      if (auto why = sm90_blocker(); !why.empty()) throw Error(ErrorKind::Unsupported, why);
      return sm90_report("requested");
    case GemmBackend::Portable:
      if (auto why = portable::blocker(g); !why.empty()) throw Error(ErrorKind::Unsupported, why);
      return {GemmBackend::Portable, "requested"};
    case GemmBackend::Auto: break;
  }
  // NOTE: cuBLASLt first when it has the chain: its kernels are tuned per shape and it was at
  // least as fast as the Hopper kernel where both ran (docs/performance.md).
  if (lt_why.empty())
    return {GemmBackend::CublasLt, fmt::format("cuBLASLt has the chain as epilogue {}", epilogue_name(*lt))};
  // NOTE: the Hopper kernel also takes the gated chains it is compiled for (swiglu and geglu in
  // blocks of kSm90GateBlock): 1.40 ms against 1.48–1.51 for GEMM + pointwise SwiGLU and 4.25 for the
  // portable kernel at 4096×28672×4096 bf16 (docs/performance.md, session 4).
  const std::string sm90_why = sm90_blocker();
  if (sm90_why.empty()) return sm90_report(fmt::format("{}; Hopper EVT kernel has it", lt_why));
  const std::string portable_why = portable::blocker(g);
  if (portable_why.empty()) return {GemmBackend::Portable, fmt::format("{} and {}", lt_why, sm90_why)};
  throw Error(ErrorKind::Unsupported,
              fmt::format("no backend for the chain {}: {}, {}, and {}", g.epilogue.to_string(), lt_why, sm90_why,
                          portable_why));
}

}  // namespace

std::string_view gemm_backend_name(GemmBackend b) {
  switch (b) {
    case GemmBackend::Auto: return "auto";
    case GemmBackend::CublasLt: return "cublaslt";
    case GemmBackend::Sm90: return "sm90";
    case GemmBackend::Portable: return "portable";
  }
  return "?";
}

struct FusedGemmHandle::Impl {
  GemmHandle cublaslt;
  DeviceBuffer workspace;
};

FusedGemmHandle::FusedGemmHandle() : impl_(std::make_unique<Impl>()) {}
FusedGemmHandle::~FusedGemmHandle() = default;

FusedGemmReport plan_fused_gemm(const FusedGemmArgs& g, GemmBackend requested) {
  validate(g, requested);
  return choose_backend(g, requested);
}

FusedGemmReport fused_gemm(FusedGemmHandle& handle, const FusedGemmArgs& g, GemmBackend requested,
                           cudaStream_t stream) {
  const Shape s = validate(g, requested);
  check_on_device(g);
  const FusedGemmReport report = choose_backend(g, requested);
  auto& h = handle.impl();
  if (report.backend == GemmBackend::CublasLt) {
    GemmArgs lt;
    lt.a = g.a;
    lt.b = g.b;
    lt.trans_b = Transpose::Yes;
    lt.d = g.d;
    lt.epilogue = *cublaslt_epilogue(g.epilogue);
    if (bias_role(lt.epilogue) == BiasRole::Input) lt.bias = g.tensors.bias;
    if (aux_role(lt.epilogue) == AuxRole::PreactOutput) lt.aux = g.tensors.aux;
    gemm(h.cublaslt, lt, stream);
    return report;
  }
  if (report.backend == GemmBackend::Portable) {
    portable::run(g, stream);
    return report;
  }
  const sm90::Chain chain = *sm90::match_chain(g.epilogue);
  sm90::Problem p{s.m, s.n, s.k, g.a.dtype,
                  g.a.data, g.a.strides[0], g.b.data, g.b.strides[0], g.d.data, g.d.strides[0],
                  g.tensors.bias.data, g.tensors.residual.data,
                  g.tensors.residual.empty() ? g.d.strides[0] : g.tensors.residual.strides[0]};
  if (sm90::is_scale_bias_act(chain)) {
    // NOTE: this kernel reads each operand it is given (an absent one is null): tensors bound in
    // g.tensors but not named by the chain must not reach it.
    const auto used = [&](EpilogueOp op, const TensorView& t) { return g.epilogue.uses(op) ? t.data : nullptr; };
    p.act = *sm90::scale_bias_act_params(g.epilogue);
    p.bias = used(EpilogueOp::ColumnBias, g.tensors.bias);
    p.row_scale = static_cast<const float*>(used(EpilogueOp::RowScale, g.tensors.row_scale));
    p.col_scale = static_cast<const float*>(used(EpilogueOp::ColumnScale, g.tensors.col_scale));
    p.quant_scale = g.tensors.quant_scale;
    p.amax = g.tensors.amax;
  }
  const std::size_t need = sm90::workspace_bytes(chain, report.schedule, p);
  if (h.workspace.bytes() < need) h.workspace = DeviceBuffer(need);
  sm90::run(chain, report.schedule, p, h.workspace.data(), stream);
  return report;
}

}  // namespace fusekit
