#include "bench/linear.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "fusekit/error.hpp"
#include "fusekit/fused_gemm.hpp"
#include "fusekit/gemm.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/pointwise.hpp"
#include "fusekit/pointwise_chain.hpp"
#include "fusekit/reference/epilogue.hpp"
#include "fusekit/reference/gemm.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/transfer.hpp"

namespace fusekit::bench {

namespace {

// NOTE: W is drawn from U(−√(3/K), √(3/K)) so that X·Wᵀ has variance 1/3 whatever K is: the
// GELU then works in its curved region instead of acting as the identity on huge values.
constexpr double kUniformVarianceFactor = 3.0;

struct LinearState {
  LinearShape shape;
  DType dtype;
  GemmHandle handle;
  FusedGemmHandle fused;
  DeviceTensor x, w, bias, residual, t1, t2, t3, y, y_gemm;
  std::vector<std::int64_t> rows;   // rows of the output that are checked
  reference::GemmResult expected_gemm, expected_linear;
  FusedGemmReport fused_report;  // the last fused_gemm call's
};

// Rung::plan of a rung whose GEMM is cuBLASLt's: the algorithm its heuristic chose.
std::function<std::string()> cublaslt_plan(const std::shared_ptr<LinearState>& s) {
  return [s] { return describe(s->handle.last_plan()); };
}

// Rung::plan of a fused_gemm rung: the backend (and schedule) it ran, and why.
std::function<std::string()> fused_plan(const std::shared_ptr<LinearState>& s) {
  return [s] { return fmt::format("{}: {}", gemm_backend_name(s->fused_report.backend), s->fused_report.reason); };
}

TensorView row_view(const TensorView& t, std::int64_t row) {
  auto* base = static_cast<char*>(t.data) + row * t.strides[0] * static_cast<std::int64_t>(t.element_size());
  return TensorView::matrix(base, t.dtype, 1, t.shape[1], t.strides[0]);
}

// Compares the checked rows of `out` with `expected` (one row per checked row, out's columns).
Check check_rows(const LinearState& s, const TensorView& out, const reference::Matrix& expected, std::string what) {
  Check c;
  c.bound = tolerance(s.dtype);
  c.nonfinite = count_nonfinite(out);
  double diff_sq = 0, ref_sq = 0;
  for (std::size_t i = 0; i < s.rows.size(); ++i) {
    const auto got = download(row_view(out, s.rows[i]));
    for (std::int64_t j = 0; j < expected.cols; ++j) {
      const double e = expected(static_cast<std::int64_t>(i), j);
      const double g = got[static_cast<std::size_t>(j)];
      if (!std::isfinite(g)) continue;  // counted in nonfinite already
      diff_sq += (g - e) * (g - e);
      ref_sq += e * e;
    }
  }
  c.rel_err = std::sqrt(diff_sq / std::max(ref_sq, std::numeric_limits<double>::min()));
  c.passed = c.nonfinite == 0 && c.rel_err <= c.bound;
  c.what = std::move(what);
  return c;
}

// What every ladder here starts from: X [M,K] and W [w_rows,K] drawn, the GEMM output t1
// [M,w_rows] and the result y [M,y_cols] allocated, the rows to check and X·Wᵀ's reference on them
// (`problem` keeps X and W for further references).
std::shared_ptr<LinearState> make_state(const LinearOptions& o, std::int64_t w_rows, std::int64_t y_cols,
                                        std::uint64_t seed, reference::GemmProblem& problem) {
  const std::int64_t m = o.shape.m, k = o.shape.k;
  auto s = std::make_shared<LinearState>();
  s->shape = o.shape;
  s->dtype = o.dtype;
  s->x = DeviceTensor(o.dtype, {m, k});
  s->w = DeviceTensor(o.dtype, {w_rows, k});
  s->t1 = DeviceTensor(o.dtype, {m, w_rows});
  s->y = DeviceTensor(o.dtype, {m, y_cols});
  const float w_range = static_cast<float>(std::sqrt(kUniformVarianceFactor / static_cast<double>(k)));
  fill_uniform(s->x, seed, -1.0f, 1.0f);
  fill_uniform(s->w, seed + 1, -w_range, w_range);
  // The rows to check, and the reference for them (computed once, shared by every rung).
  s->rows = rows_to_check(m, o.scope, seed);
  problem.a = reference::Matrix(m, k);
  problem.a.data = download(s->x);
  problem.b = reference::Matrix(w_rows, k);
  problem.b.data = download(s->w);
  problem.trans_b = Transpose::Yes;
  problem.epilogue = Epilogue::Default;
  s->expected_gemm = reference::gemm_rows(problem, s->rows);
  return s;
}

std::string check_scope(const LinearState& s, std::uint64_t seed) {
  return s.rows.size() == static_cast<std::size_t>(s.shape.m)
             ? "every row vs CPU double reference"
             : fmt::format("{} sampled rows vs CPU double reference (seed {})", s.rows.size(), seed);
}

// Y = silu(X·W1ᵀ) ⊙ (X·W3ᵀ) with W1 and W3 interleaved in blocks of kGateBlock rows of W.
LadderRun make_swiglu_ladder(const LinearOptions& o, std::uint64_t seed) {
  const auto [m, n_out, k] = o.shape;
  const std::int64_t n = 2 * n_out;  // rows of W, columns of X·Wᵀ
  require(n_out % kGateBlock == 0, "n (columns of Y)", fmt::format("a multiple of {}", kGateBlock), n_out);
  reference::GemmProblem p;
  const auto s = make_state(o, n, n_out, seed, p);
  const EpilogueSpec chain = EpilogueSpec{}.swiglu(kGateBlock);
  s->expected_linear.d = reference::apply_epilogue(chain, s->expected_gemm.d, {}).out;
  const std::string what = check_scope(*s, seed);

  LadderRun ladder;
  ladder.ladder = "swiglu";
  ladder.shape = fmt::format("{}x{}x{}", m, n, k);
  ladder.dtype = std::string(dtype_name(o.dtype));
  ladder.baseline = "unfused";
  const double flops = 2.0 * m * n * k;
  const double esz = static_cast<double>(dtype_size(o.dtype));
  const double io_bytes = esz * (m * k + n * k + m * n_out);

  // X·Wᵀ into t1, by cuBLASLt.
  const auto gemm_into_t1 = [s](cudaStream_t st) {
    GemmArgs g;
    g.a = s->x;
    g.b = s->w;
    g.trans_b = Transpose::Yes;
    g.d = s->t1;
    gemm(s->handle, g, st);
  };
  ladder.rungs.push_back(Rung{
      "gemm", "plain GEMM into [M, 2N], no epilogue (peer line)", gemm_into_t1,
      [s](cudaStream_t st) { poison(s->t1, st); },
      [s, what] { return check_rows(*s, s->t1, s->expected_gemm.d, what); }, flops, esz * (m * k + n * k + m * n),
      cublaslt_plan(s)});
  ladder.rungs.push_back(Rung{
      "unfused",
      "cuBLASLt GEMM into [M, 2N], then the one-pass SwiGLU pointwise kernel (no cuBLASLt epilogue has a gate)",
      [s, chain, gemm_into_t1](cudaStream_t st) {
        gemm_into_t1(st);
        pointwise_chain({chain, s->t1, {}, s->y}, st);
      },
      [s](cudaStream_t st) {
        poison(s->t1, st);
        poison(s->y, st);
      },
      [s, what] { return check_rows(*s, s->y, s->expected_linear.d, what); }, flops, io_bytes, cublaslt_plan(s)});
  const auto fused_rung = [&](const char* name, const char* description, GemmBackend backend) {
    ladder.rungs.push_back(Rung{
        name, description,
        [s, chain, backend](cudaStream_t st) {
          s->fused_report = fused_gemm(s->fused, {s->x, s->w, s->y, chain, {}}, backend, st);
        },
        [s](cudaStream_t st) { poison(s->y, st); },
        [s, what] { return check_rows(*s, s->y, s->expected_linear.d, what); }, flops, io_bytes, fused_plan(s)});
  };
  fused_rung("portable", "Level 2: fusekit's mma.sync kernel, the gate paired in its shared-memory staged epilogue",
             GemmBackend::Portable);
  try {
    plan_fused_gemm({s->x, s->w, s->y, chain, {}}, GemmBackend::Sm90);
    fused_rung("hopper",
               "Level 2: the CUTLASS Hopper kernel; gate and up are the halves of its 128×256 tile, paired in "
               "registers, and a 128×128 tile is stored",
               GemmBackend::Sm90);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Unsupported) throw;
    fmt::print("swiglu: no hopper rung ({})\n", e.what());
  }
  return ladder;
}

}  // namespace

LadderRun make_linear_ladder(const LinearOptions& o) {
  const auto [m, n, k] = o.shape;
  require(m > 0 && n > 0 && k > 0, "shape (m, n, k)", "all positive", fmt::format("{}, {}, {}", m, n, k));
  require(o.dtype == DType::BF16 || o.dtype == DType::F16, "dtype", "bf16 or f16", dtype_name(o.dtype));
  const std::uint64_t seed = seed_or_fresh(o.seed);
  if (o.chain == LinearChain::SwiGlu) return make_swiglu_ladder(o, seed);

  reference::GemmProblem p;
  const auto s = make_state(o, n, n, seed, p);
  s->bias = DeviceTensor(o.dtype, {n});
  s->t2 = DeviceTensor(o.dtype, {m, n});
  s->y_gemm = DeviceTensor(o.dtype, {m, n});
  fill_uniform(s->bias, seed + 2, -1.0f, 1.0f);
  p.bias = download(s->bias);
  p.epilogue = Epilogue::GeluBias;
  s->expected_linear = reference::gemm_rows(p, s->rows);
  const bool with_residual = o.chain == LinearChain::BiasGeluResidual;
  if (with_residual) {
    s->residual = DeviceTensor(o.dtype, {m, n});
    s->t3 = DeviceTensor(o.dtype, {m, n});
    fill_uniform(s->residual, seed + 3, -1.0f, 1.0f);
    for (std::size_t i = 0; i < s->rows.size(); ++i) {
      const auto r = download(row_view(s->residual, s->rows[i]));
      for (std::int64_t j = 0; j < n; ++j)
        s->expected_linear.d(static_cast<std::int64_t>(i), j) += r[static_cast<std::size_t>(j)];
    }
  }
  const std::string what = check_scope(*s, seed);

  LadderRun ladder;
  ladder.ladder = with_residual ? "residual" : "linear";
  ladder.shape = fmt::format("{}x{}x{}", m, n, k);
  ladder.dtype = std::string(dtype_name(o.dtype));
  ladder.baseline = "unfused";
  const double flops = 2.0 * m * n * k;
  const double esz = static_cast<double>(dtype_size(o.dtype));
  const double io_bytes = esz * (m * k + n * k + n + m * n * (with_residual ? 2 : 1));
  const EpilogueSpec chain =
      with_residual ? EpilogueSpec{}.bias().gelu_tanh().residual() : EpilogueSpec{}.bias().gelu_tanh();

  auto linear_args = [s](Epilogue e, const TensorView& out) {
    GemmArgs g;
    g.a = s->x;
    g.b = s->w;
    g.trans_b = Transpose::Yes;
    g.d = out;
    g.epilogue = e;
    if (bias_role(e) == BiasRole::Input) g.bias = s->bias;
    return g;
  };

  ladder.rungs.push_back(Rung{
      "gemm", "plain GEMM, no epilogue (peer line)",
      [s, linear_args](cudaStream_t st) { gemm(s->handle, linear_args(Epilogue::Default, s->y_gemm), st); },
      [s](cudaStream_t st) { poison(s->y_gemm, st); },
      [s, what] { return check_rows(*s, s->y_gemm, s->expected_gemm.d, what); }, flops,
      esz * (m * k + n * k + m * n), cublaslt_plan(s)});
  ladder.rungs.push_back(Rung{
      "unfused", with_residual ? "GEMM, then bias, GELU and add kernels" : "GEMM, then bias kernel, then GELU kernel",
      [s, linear_args, with_residual](cudaStream_t st) {
        gemm(s->handle, linear_args(Epilogue::Default, s->t1), st);
        add_bias(s->t1, s->bias, s->t2, st);
        if (!with_residual) return gelu(s->t2, s->y, st);
        gelu(s->t2, s->t3, st);
        add(s->t3, s->residual, s->y, st);
      },
      [s, with_residual](cudaStream_t st) {
        poison(s->t1, st);
        poison(s->t2, st);
        if (with_residual) poison(s->t3, st);
        poison(s->y, st);
      },
      [s, what] { return check_rows(*s, s->y, s->expected_linear.d, what); }, flops, io_bytes, cublaslt_plan(s)});
  ladder.rungs.push_back(Rung{
      "cublaslt", with_residual ? "Level 1: cuBLASLt GELU_BIAS epilogue, then an add kernel"
                                : "Level 1: cuBLASLt GELU_BIAS epilogue",
      [s, linear_args, with_residual](cudaStream_t st) {
        if (!with_residual) return gemm(s->handle, linear_args(Epilogue::GeluBias, s->y), st);
        gemm(s->handle, linear_args(Epilogue::GeluBias, s->t3), st);
        add(s->t3, s->residual, s->y, st);
      },
      [s, with_residual](cudaStream_t st) {
        if (with_residual) poison(s->t3, st);
        poison(s->y, st);
      },
      [s, what] { return check_rows(*s, s->y, s->expected_linear.d, what); }, flops, io_bytes, cublaslt_plan(s)});
  // A rung of one fused_gemm call running `spec` (the ladder's maths) on `backend`.
  const auto fused_rung = [&](const char* name, const char* description, const EpilogueSpec& spec,
                              GemmBackend backend, Sm90Schedule schedule = Sm90Schedule::Auto) {
    ladder.rungs.push_back(Rung{
        name, description,
        [s, spec, backend, schedule](cudaStream_t st) {
          FusedGemmArgs g{s->x, s->w, s->y, spec, {}, schedule};
          g.tensors.bias = s->bias;
          if (spec.uses(EpilogueOp::Residual)) g.tensors.residual = s->residual;
          s->fused_report = fused_gemm(s->fused, g, backend, st);
        },
        [s](cudaStream_t st) { poison(s->y, st); },
        [s, what] { return check_rows(*s, s->y, s->expected_linear.d, what); }, flops, io_bytes, fused_plan(s)});
  };
  fused_rung("portable", "Level 2: fusekit's mma.sync kernel, the chain in a shared-memory staged epilogue", chain,
             GemmBackend::Portable);
  // What a caller gets who leaves every choice to fusekit (backend, and the Hopper kernel's schedule).
  fused_rung("auto", "fused_gemm's own choice of backend and schedule (its report says which and why)", chain,
             GemmBackend::Auto);
  if (current_device_info().cc_major == 9) {
    fused_rung("hopper", "Level 2: CUTLASS TMA warp-specialized cooperative kernel, the chain as an epilogue visitor tree",
               chain, GemmBackend::Sm90, Sm90Schedule::Cooperative);
    fused_rung("hopper_pp", "Level 2: the same with the pingpong schedule (a 128x128 tile per warpgroup, alternating)",
               chain, GemmBackend::Sm90, Sm90Schedule::Pingpong);
    fused_rung("hopper_deferred",
               "Level 2: the cooperative mainloop with a deferred epilogue (three producer warps apply GELU and the "
               "residual under the next tile's mainloop)",
               chain, GemmBackend::Sm90, Sm90Schedule::Deferred);
    // Our kernel with no epilogue (D = acc), beside the gemm rung (cuBLAS's): what the chain's
    // epilogue costs ours, and how far our mainloop is from cuBLAS's.
    if (!with_residual)
      ladder.rungs.push_back(Rung{
          "hopper_gemm", "the Cooperative kernel with no epilogue (peer line)",
          [s](cudaStream_t st) {
            FusedGemmArgs g{s->x, s->w, s->y_gemm, EpilogueSpec{}, {}, Sm90Schedule::Cooperative};
            s->fused_report = fused_gemm(s->fused, g, GemmBackend::Sm90, st);
          },
          [s](cudaStream_t st) { poison(s->y_gemm, st); },
          [s, what] { return check_rows(*s, s->y_gemm, s->expected_gemm.d, what); }, flops,
          esz * (m * k + n * k + m * n), fused_plan(s)});
    // The same maths written 1·acc first, which only the scale-bias-activation kernel has: what
    // its run-time parameters and broadcasts cost against the chain's own kernel.
    EpilogueSpec generic;
    generic.scale(1.0f).nodes.insert(generic.nodes.end(), chain.nodes.begin(), chain.nodes.end());
    fused_rung("hopper_sba",
               "Level 2: the CUTLASS scale-bias-activation kernel (the chain as 1·acc first: run-time α, activation "
               "and bounds, absent scales read as 1)",
               generic, GemmBackend::Sm90);
  }
  return ladder;
}

}  // namespace fusekit::bench
