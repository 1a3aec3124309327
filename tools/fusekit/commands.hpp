#pragma once
// Each command of the CLI lives in its own file and registers itself here: it adds its
// subcommand to the app and returns what to run when that subcommand was chosen.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/harness.hpp"

namespace fusekit::tools {

inline constexpr int kExitError = 1;
inline constexpr int kExitNoDevice = 3;
inline constexpr int kExitCheckFailed = 4;

using Runner = std::function<int()>;
struct Command {
  CLI::App* app;
  Runner run;
};
using Commands = std::vector<Command>;

// Every extent the CLI takes (rows, columns, M, N, K, batch, heads, S, D): 1 … 2^30, so that a
// product of two, in bytes, stays inside the traffic model's 64-bit integers.
inline constexpr std::int64_t kMaxExtent = std::int64_t{1} << 30;
inline CLI::Validator extent_range() { return CLI::Range(std::int64_t{1}, kMaxExtent); }

// Prints why `what` needs a GPU and returns kExitNoDevice.
int no_device(const std::string& what);

// Options every `fusekit bench <ladder>` takes.
// What --sms bounds.
enum class SmScope : std::uint8_t {
  Grids,      // the grids fusekit sizes (set_sm_limit); their CTAs may still take any SM
  Partition,  // and every kernel of the bench runs on that many SMs only (SmPartitionStream)
};

struct CommonBenchOptions {
  bool check = false;       // validate every output element (slow); default: sampled
  std::string json_path;    // one JSON line per rung
  std::uint64_t seed = 0;   // 0: fresh
  int min_runs = bench::TimingOptions{}.min_runs;
  double min_ms = bench::TimingOptions{}.min_total_ms;
  // Only these rungs (all when empty): one rung timed against a peer from another process, with
  // no other rung's load just before it (the H200's clocks follow its recent power draw).
  std::vector<std::string> rungs;
  // fusekit's grids sized for this many SMs (set_sm_limit; 0: all): another GPU's bytes per SM on
  // this one, or the SMs left beside other work.
  int sms = 0;
  SmScope sms_scope = SmScope::Grids;
};
void add_common_bench_options(CLI::App* sub, CommonBenchOptions& options);

// Runs each ladder (validate, time, compare), prints its table, writes JSON lines; returns the
// exit code (kExitCheckFailed when any rung failed validation).
int run_ladders(const std::function<std::vector<bench::LadderRun>()>& make_ladders,
                const CommonBenchOptions& options);

// "fusekit VERSION (commit C), CUDA X.Y, machine code ARCHS": the build, for printed results.
std::string version_line();

void add_version_command(CLI::App& app, Commands& commands);  // fusekit version
void add_devices_command(CLI::App& app, Commands& commands);
void add_bench_linear_command(CLI::App& bench, Commands& commands);
void add_explain_command(CLI::App& app, Commands& commands);  // fusekit explain <case>
void add_verify_command(CLI::App& app, Commands& commands);   // fusekit verify <ladder>
void add_bench_norm_commands(CLI::App& bench, Commands& commands);
void add_bench_attention_command(CLI::App& bench, Commands& commands);
void add_bench_row_backward_commands(CLI::App& bench, Commands& commands);

}  // namespace fusekit::tools
