// The fusekit command-line tool.
//   fusekit version                     the build: version, commit, CUDA runtime, machine code
//   fusekit devices                     the GPU, its SMs, memory and measured copy bandwidth
//   fusekit bench <ladder> [options]    validate, then time, every rung of a ladder
//   fusekit explain <case> [shape]      the seeds' arithmetic from the traffic model (no GPU)
//   fusekit verify <ladder> [options]   hardware counters per kernel, judged against the model
// On a machine without a GPU, GPU commands print what needs no GPU (the ladder's modelled FLOPs
// and bytes) and then exit non-zero, saying why.
#include <fmt/format.h>

#include "fusekit/error.hpp"
#include "tools/fusekit/commands.hpp"

int main(int argc, char** argv) {
  using namespace fusekit::tools;
  CLI::App app{"fusekit: fused kernels on NVIDIA tensor cores, measured and proven"};
  app.set_version_flag("--version", version_line());
  app.require_subcommand(1);
  Commands commands;
  add_version_command(app, commands);
  add_devices_command(app, commands);
  auto* bench = app.add_subcommand("bench", "validate, then time, each rung of a ladder against its baseline");
  bench->require_subcommand(1);
  add_bench_linear_command(*bench, commands);
  add_explain_command(app, commands);
  add_verify_command(app, commands);
  add_bench_norm_commands(*bench, commands);
  add_bench_attention_command(*bench, commands);
  add_bench_row_backward_commands(*bench, commands);

  CLI11_PARSE(app, argc, argv);
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const fusekit::Error& e) {
    fmt::print(stderr, "fusekit: {}\n", e.what());
    return e.kind() == fusekit::ErrorKind::NoDevice ? kExitNoDevice : kExitError;
  } catch (const std::exception& e) {  // e.g. the traffic model's std::invalid_argument: never a crash
    fmt::print(stderr, "fusekit: error: {}\n", e.what());
    return kExitError;
  }
  return kExitError;
}
