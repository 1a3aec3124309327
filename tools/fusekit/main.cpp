// The fusekit command-line tool.
//   fusekit devices                        the GPU, its SMs, memory and measured copy bandwidth
//   fusekit bench linear [shape] [--check] [--json FILE]
//                                          validate, then time, every rung of a ladder
// On a machine without a GPU, GPU commands print what needs no GPU (the ladder's modelled
// FLOPs and bytes) and then exit non-zero, saying why.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <optional>

#include "bench/harness.hpp"
#include "bench/linear.hpp"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "tools/fusekit/model_print.hpp"

namespace {

constexpr int kExitNoDevice = 3;
constexpr int kExitCheckFailed = 4;
constexpr int kExitError = 1;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kTB = 1e12;

int no_device(const std::string& what) {
  fmt::print(stderr, "fusekit: {} needs a CUDA GPU: {}\n", what, fusekit::no_device_reason());
  return kExitNoDevice;
}

int cmd_devices() {
  if (fusekit::device_count() == 0) return no_device("devices");
  const auto info = fusekit::current_device_info();
  fusekit::Stream stream;
  const double bw = fusekit::bench::measure_copy_bandwidth(stream);
  fmt::print("device {}: {}\n", info.index, info.name);
  fmt::print("  compute capability {}.{} ({}), {} SMs, {:.0f} MHz\n", info.cc_major, info.cc_minor, info.chip(),
             info.sm_count, info.clock_khz / 1e3);
  fmt::print("  memory {:.1f} GiB, L2 {:.1f} MiB, shared memory per block (opt-in) {} KiB\n",
             info.memory_bytes / kGiB, info.l2_bytes / (1024.0 * 1024.0), info.smem_per_block_optin / 1024);
  fmt::print("  measured copy bandwidth {:.2f} TB/s (bytes read + written)\n", bw / kTB);
  return 0;
}

struct BenchArgs {
  std::string ladder = "linear";
  std::optional<std::int64_t> m, n, k;
  std::string dtype = "bf16";
  bool check = false;
  std::string json_path;
  std::uint64_t seed = 0;
  int min_runs = fusekit::bench::TimingOptions{}.min_runs;
};

int cmd_bench(const BenchArgs& a) {
  using namespace fusekit::bench;
  const fusekit::DType dtype = fusekit::parse_dtype(a.dtype, "--dtype");
  std::vector<LinearShape> shapes;
  if (a.m || a.n || a.k) {
    const LinearShape d = kLinearShapes[0];
    shapes.push_back({a.m.value_or(d.m), a.n.value_or(d.n), a.k.value_or(d.k)});
  } else {
    shapes.assign(std::begin(kLinearShapes), std::end(kLinearShapes));
  }
  for (const auto& s : shapes) fmt::print("{}", fusekit::tools::linear_model_summary(s.m, s.n, s.k, dtype));
  if (fusekit::device_count() == 0) return no_device("bench " + a.ladder);

  std::ofstream json;
  if (!a.json_path.empty()) {
    json.open(a.json_path);
    if (!json) throw fusekit::Error(fusekit::ErrorKind::InvalidArgument, fmt::format("--json: cannot write {}", a.json_path));
  }
  TimingOptions timing;
  timing.min_runs = a.min_runs;
  fusekit::Stream stream;
  std::vector<RungResult> all;
  for (const auto& s : shapes) {
    LadderRun ladder = make_linear_ladder(
        {s, dtype, a.check ? CheckScope::AllRows : CheckScope::SampledRows, a.seed});
    auto results = run_ladder(ladder, timing, stream);
    for (const auto& r : results) {
      if (json) json << to_json(r).dump() << "\n";
    }
    fmt::print("{}", format_table(results));
    all.insert(all.end(), results.begin(), results.end());
  }
  const bool all_valid = std::all_of(all.begin(), all.end(), [](const RungResult& r) { return r.check.passed; });
  if (!all_valid) {
    fmt::print(stderr, "fusekit: a rung failed validation; its time is not reported\n");
    return kExitCheckFailed;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fusekit: fused kernels on NVIDIA tensor cores, measured and proven"};
  app.require_subcommand(1);

  auto* devices = app.add_subcommand("devices", "print the GPU, SM count, memory and measured copy bandwidth");

  BenchArgs bench_args;
  auto* bench = app.add_subcommand("bench", "validate, then time, each rung of a ladder against its baseline");
  bench->add_option("ladder", bench_args.ladder, "which ladder")->check(CLI::IsMember({"linear"}))->required();
  bench->add_option("--m", bench_args.m, "rows of X and Y (default: the ladder's four shapes)");
  bench->add_option("--n", bench_args.n, "columns of Y (rows of W)");
  bench->add_option("--k", bench_args.k, "the reduced dimension");
  bench->add_option("--dtype", bench_args.dtype, "bf16 or f16")->capture_default_str();
  bench->add_flag("--check", bench_args.check, "validate every output row against the CPU reference (slow)");
  bench->add_option("--json", bench_args.json_path, "write one JSON line per rung to FILE");
  bench->add_option("--seed", bench_args.seed, "random seed (default: a fresh one each run)");
  bench->add_option("--runs", bench_args.min_runs, "minimum timed runs per rung")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    if (*devices) return cmd_devices();
    if (*bench) return cmd_bench(bench_args);
  } catch (const fusekit::Error& e) {
    fmt::print(stderr, "fusekit: {}\n", e.what());
    return e.kind() == fusekit::ErrorKind::NoDevice ? kExitNoDevice : kExitError;
  }
  return 0;
}
