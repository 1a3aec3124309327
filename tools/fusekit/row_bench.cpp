#include "tools/fusekit/row_bench.hpp"

#include <fmt/format.h>

#include <memory>
#include <utility>
#include <vector>

#include "bench/norm.hpp"
#include "fusekit/runtime.hpp"

namespace fusekit::tools {

namespace {
constexpr double kBytesPerMb = 1e6;

struct RowBenchArgs {
  std::int64_t rows = bench::RowOpOptions{}.rows;
  std::int64_t cols = bench::RowOpOptions{}.cols;
  std::string dtype = "bf16";
  bool sweep = false;
  CommonBenchOptions common;
};
}  // namespace

void add_row_bench(CLI::App& bench, Commands& commands, const std::string& name, const std::string& help,
                   int tensors, RowLadderMaker make) {
  auto args = std::make_shared<RowBenchArgs>();
  auto* sub = bench.add_subcommand(name, help);
  sub->add_option("--rows", args->rows, "rows")->check(extent_range())->capture_default_str();
  sub->add_option("--cols", args->cols, "row length")->check(extent_range())->capture_default_str();
  sub->add_option("--dtype", args->dtype, "bf16, f16 or f32")->capture_default_str();
  sub->add_flag("--sweep", args->sweep, "row lengths 512 … 262144, rows = 2^27 / length (ignores --rows, --cols)");
  add_common_bench_options(sub, args->common);
  commands.push_back({sub, [args, name, tensors, make = std::move(make)] {
    const DType dtype = parse_dtype(args->dtype, "--dtype");
    std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
    if (args->sweep) {
      for (const std::int64_t n : bench::sweep_row_lengths()) shapes.emplace_back(bench::kSweepElements / n, n);
    } else {
      shapes.emplace_back(args->rows, args->cols);
    }
    for (const auto& [m, n] : shapes)
      fmt::print("{} {}x{} {}: {:.1f} MB minimum traffic\n", name, m, n, dtype_name(dtype),
                 tensors * static_cast<double>(m * n) * static_cast<double>(dtype_size(dtype)) / kBytesPerMb);
    if (device_count() == 0) return no_device(fmt::format("bench {}", name));
    const auto scope = args->common.check ? bench::CheckScope::AllRows : bench::CheckScope::SampledRows;
    return run_ladders(
        [&] {
          std::vector<bench::LadderRun> ladders;
          for (const auto& [m, n] : shapes) ladders.push_back(make(m, n, dtype, scope, args->common.seed));
          return ladders;
        },
        args->common);
  }});
}

}  // namespace fusekit::tools
