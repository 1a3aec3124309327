// fusekit bench linear:   Y = gelu(X·Wᵀ + b)
// fusekit bench residual: Y = gelu(X·Wᵀ + b) + R
// fusekit bench swiglu:   Y = silu(X·W1ᵀ) ⊙ (X·W3ᵀ), W1 and W3 interleaved in one weight
// Each: the unfused chain vs cuBLASLt's epilogue (where it has one) vs fusekit's fused kernels,
// with the plain GEMM as the peer line.
#include <fmt/format.h>

#include <optional>

#include "bench/linear.hpp"
#include "fusekit/runtime.hpp"
#include "tools/fusekit/commands.hpp"
#include "tools/fusekit/model_print.hpp"

namespace fusekit::tools {

namespace {
struct LinearArgs {
  std::optional<std::int64_t> m, n, k;
  std::string dtype = "bf16";
  CommonBenchOptions common;
};

std::string ladder_name(bench::LinearChain chain) {
  switch (chain) {
    case bench::LinearChain::BiasGelu: return "linear";
    case bench::LinearChain::BiasGeluResidual: return "residual";
    case bench::LinearChain::SwiGlu: return "swiglu";
  }
  return "?";
}

std::string ladder_description(bench::LinearChain chain) {
  switch (chain) {
    case bench::LinearChain::BiasGelu:
      return "Y = gelu(X·Wᵀ + b): unfused vs cuBLASLt GELU_BIAS vs Hopper kernel vs plain GEMM";
    case bench::LinearChain::BiasGeluResidual:
      return "Y = gelu(X·Wᵀ + b) + R: unfused vs cuBLASLt GELU_BIAS + add vs Hopper fused kernel";
    case bench::LinearChain::SwiGlu:
      return "Y = silu(X·W1ᵀ) ⊙ (X·W3ᵀ), one interleaved [2N,K] weight: GEMM + SwiGLU kernel vs fused kernels";
  }
  return "?";
}

void add_linear_ladder_command(CLI::App& bench, Commands& commands, bench::LinearChain chain) {
  const bool swiglu = chain == bench::LinearChain::SwiGlu;
  const std::string name = ladder_name(chain);
  auto args = std::make_shared<LinearArgs>();
  auto* sub = bench.add_subcommand(name, ladder_description(chain));
  sub->add_option("--m", args->m, swiglu ? "rows of X and Y (default 4096)" : "rows of X and Y (default: the ladder's four shapes)")
      ->check(extent_range());
  sub->add_option("--n", args->n, swiglu ? "columns of Y (W has 2n rows; default 14336)" : "columns of Y (rows of W)")
      ->check(extent_range());
  sub->add_option("--k", args->k, "the reduced dimension")->check(extent_range());
  sub->add_option("--dtype", args->dtype, "bf16 or f16")->capture_default_str();
  add_common_bench_options(sub, args->common);
  commands.push_back({sub, [args, chain, name, swiglu] {
    const DType dtype = parse_dtype(args->dtype, "--dtype");
    std::vector<bench::LinearShape> shapes;
    if (args->m || args->n || args->k || swiglu) {
      const auto d = swiglu ? bench::kSwiGluShape : bench::kLinearShapes[0];
      shapes.push_back({args->m.value_or(d.m), args->n.value_or(d.n), args->k.value_or(d.k)});
    } else {
      shapes.assign(std::begin(bench::kLinearShapes), std::end(bench::kLinearShapes));
    }
    if (!swiglu)
      for (const auto& s : shapes) fmt::print("{}", linear_model_summary(s.m, s.n, s.k, dtype));
    if (device_count() == 0) return no_device("bench " + name);
    return run_ladders(
        [&] {
          std::vector<bench::LadderRun> ladders;
          for (const auto& s : shapes)
            ladders.push_back(bench::make_linear_ladder(
                {s, chain, dtype, args->common.check ? bench::CheckScope::AllRows : bench::CheckScope::SampledRows,
                 args->common.seed}));
          return ladders;
        },
        args->common);
  }});
}

}  // namespace

void add_bench_linear_command(CLI::App& bench, Commands& commands) {
  add_linear_ladder_command(bench, commands, bench::LinearChain::BiasGelu);
  add_linear_ladder_command(bench, commands, bench::LinearChain::BiasGeluResidual);
  add_linear_ladder_command(bench, commands, bench::LinearChain::SwiGlu);
}

}  // namespace fusekit::tools
