// What the commands share: the no-GPU message and running ladders.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <optional>

#include "fusekit/build_info.hpp"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

int no_device(const std::string& what) {
  fmt::print(stderr, "fusekit: {} needs a CUDA GPU: {}\n", what, no_device_reason());
  return kExitNoDevice;
}

void add_common_bench_options(CLI::App* sub, CommonBenchOptions& o) {
  sub->add_flag("--check", o.check, "validate every output element against the CPU reference (slow)");
  sub->add_option("--json", o.json_path, "write one JSON line per rung to FILE, naming the build's commit and the GPU");
  sub->add_option("--seed", o.seed, "random seed (default: a fresh one each run)");
  sub->add_option("--runs", o.min_runs, "minimum timed runs per rung")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  sub->add_option("--min-ms", o.min_ms, "minimum timed GPU milliseconds per rung")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--rung", o.rungs, "time only the named rung (repeatable; default: every rung)");
  auto* sms = sub->add_option("--sms", o.sms,
                              "size fusekit's grids for N SMs (fusekit::set_sm_limit; default: all of them); "
                              "cuBLASLt's kernels are not capped")
                  ->check(CLI::Range(1, INT_MAX));
  sub->add_option("--sms-scope", o.sms_scope,
                  "what --sms bounds: 'grids' (default: fusekit's grids, whose CTAs may take any SM) or 'partition' "
                  "(also every kernel of the bench, cuBLASLt's included, on N SMs only: a green context, N a "
                  "multiple of the GPU's partition size, 8 on sm_90)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, SmScope>{{"grids", SmScope::Grids}, {"partition", SmScope::Partition}}))
      ->needs(sms);
}

int run_ladders(const std::function<std::vector<bench::LadderRun>()>& make_ladders, const CommonBenchOptions& o) {
  std::ofstream json;
  if (!o.json_path.empty()) {
    json.open(o.json_path);
    require(static_cast<bool>(json), "--json", "a writable file", o.json_path);
  }
  if (o.sms > 0) {
    const int device_sms = current_device_info().device_sm_count;
    require(o.sms <= device_sms, "--sms", fmt::format("1 to the GPU's {} SMs", device_sms), o.sms);
    set_sm_limit(o.sms);
    fmt::print("fusekit: grids sized for {} of the GPU's {} SMs (--sms)\n", o.sms, device_sms);
  }
  std::optional<SmPartitionStream> partition;
  if (o.sms > 0 && o.sms_scope == SmScope::Partition) {
    partition.emplace(o.sms);
    fmt::print("fusekit: every kernel on {} SMs only (--sms-scope partition)\n", partition->sms());
  }
  bench::TimingOptions timing;
  timing.min_runs = o.min_runs;
  timing.min_total_ms = o.min_ms;
  Stream own_stream;
  const cudaStream_t stream = partition ? partition->get() : own_stream.get();
  bool all_valid = true;
  for (auto& ladder : make_ladders()) {
    if (!o.rungs.empty()) {
      std::vector<std::string> names;
      for (const auto& rung : ladder.rungs) names.push_back(rung.name);
      std::erase_if(ladder.rungs, [&](const bench::Rung& rung) {
        return std::find(o.rungs.begin(), o.rungs.end(), rung.name) == o.rungs.end();
      });
      require(!ladder.rungs.empty(), "--rung", fmt::format("one of {}", fmt::join(names, ", ")),
              fmt::format("{}", fmt::join(o.rungs, ", ")));
    }
    const auto results = bench::run_ladder(ladder, timing, stream);
    for (const auto& r : results) {
      if (json) {
        // Each line names the code and the GPU that made it.
        auto line = bench::to_json(r);
        line["commit"] = build_info().commit;
        line["device"] = current_device_info().name;
        line["sms"] = current_device_info().sm_count;
        line["sms_scope"] = partition ? "partition" : "grids";
        json << line.dump() << "\n";
      }
      all_valid = all_valid && r.check.passed;
    }
    fmt::print("{}", bench::format_table(results));
  }
  if (!all_valid) {
    fmt::print(stderr, "fusekit: a rung failed validation; its time is not reported\n");
    return kExitCheckFailed;
  }
  return 0;
}

}  // namespace fusekit::tools
