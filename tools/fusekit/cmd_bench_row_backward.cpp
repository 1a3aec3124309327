// fusekit bench rmsnorm_bwd|layernorm_bwd|softmax_bwd: the fused row backward kernels, at one
// shape or over the row-length sweep (512 … 262144 at ~128 M elements, where the op holds the row).
#include <fmt/format.h>

#include "bench/norm.hpp"
#include "bench/row_backward.hpp"
#include "fusekit/runtime.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

namespace {
struct RowBackwardArgs {
  std::int64_t rows = bench::RowBackwardOptions{}.rows;
  std::int64_t cols = bench::RowBackwardOptions{}.cols;
  std::string dtype = "bf16";
  bool sweep = false;
  CommonBenchOptions common;
};

void add_row_backward_op(CLI::App& bench, Commands& commands, bench::RowBackwardOp op, const std::string& help) {
  auto args = std::make_shared<RowBackwardArgs>();
  auto* sub = bench.add_subcommand(std::string(bench::row_backward_op_name(op)), help);
  sub->add_option("--rows", args->rows, "rows")->capture_default_str();
  sub->add_option("--cols", args->cols, "row length")->capture_default_str();
  sub->add_option("--dtype", args->dtype, "bf16, f16 or f32")->capture_default_str();
  sub->add_flag("--sweep", args->sweep, "row lengths 512 … 262144, rows = 2^27 / length (ignores --rows, --cols)");
  add_common_bench_options(sub, args->common);
  commands.push_back({sub, [args, op] {
    const DType dtype = parse_dtype(args->dtype, "--dtype");
    std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
    if (args->sweep) {
      for (const std::int64_t n : bench::sweep_row_lengths()) shapes.emplace_back(bench::kSweepElements / n, n);
    } else {
      shapes.emplace_back(args->rows, args->cols);
    }
    for (const auto& [m, n] : shapes)
      fmt::print("{} {}x{} {}: {:.1f} MB minimum traffic\n", bench::row_backward_op_name(op), m, n,
                 dtype_name(dtype), 3.0 * static_cast<double>(m * n) * static_cast<double>(dtype_size(dtype)) / 1e6);
    if (device_count() == 0) return no_device(fmt::format("bench {}", bench::row_backward_op_name(op)));
    return run_ladders(
        [&] {
          std::vector<bench::LadderRun> ladders;
          for (const auto& [m, n] : shapes)
            ladders.push_back(bench::make_row_backward_ladder(
                {op, m, n, dtype, args->common.check ? bench::CheckScope::AllRows : bench::CheckScope::SampledRows,
                 args->common.seed}));
          return ladders;
        },
        args->common);
  }});
}
}  // namespace

void add_bench_row_backward_commands(CLI::App& bench, Commands& commands) {
  add_row_backward_op(bench, commands, bench::RowBackwardOp::RmsNorm, "dx, dw of y = rmsnorm(x)·w: fused");
  add_row_backward_op(bench, commands, bench::RowBackwardOp::LayerNorm, "dx, dw, db of y = layernorm(x)·w + b: fused");
  add_row_backward_op(bench, commands, bench::RowBackwardOp::Softmax, "dx of y = softmax(x): fused");
}

}  // namespace fusekit::tools
