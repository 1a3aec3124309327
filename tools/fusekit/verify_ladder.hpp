#pragma once
// What every `fusekit verify <ladder>` shares: validate each rung, profile it under the CUPTI
// Range Profiler, judge it against the traffic model, print, write JSON and SVG. A new ladder's
// verify command builds its bench::LadderRun and model::Ladder and calls verify_ladder.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "bench/harness.hpp"
#include "fusekit/model/traffic.hpp"

namespace fusekit::tools {

// Exit code when a rung ran and validated but a seed check failed.
inline constexpr int kExitVerdictFailed = 5;

struct VerifyOptions {
  std::string json_path;
  std::string svg_path;
  std::string flush = "each-kernel";
  double tolerance = 0.15;  // of the modelled DRAM drop
  std::uint64_t seed = 0;   // 0: fresh
};
void add_verify_options(CLI::App* sub, VerifyOptions& options);

// Runs the whole verification of one ladder; returns the exit code (kExitCheckFailed when a
// rung failed validation, kExitVerdictFailed when a verdict failed, else 0).
int verify_ladder(bench::LadderRun& bench_ladder, const model::Ladder& model_ladder,
                  const VerifyOptions& options);

// Without a GPU: prints the model of `model_ladder` and returns kExitNoDevice.
int verify_without_device(const model::Ladder& model_ladder, const std::string& what);

}  // namespace fusekit::tools
