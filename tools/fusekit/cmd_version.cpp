// fusekit version: the build's version, commit, CUDA runtime and machine code (no GPU needed).
#include <fmt/format.h>

#include "fusekit/build_info.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

namespace {
constexpr int kCudaMajor = 1000;  // CUDART_VERSION = 1000·major + 10·minor
constexpr int kCudaMinor = 10;
}  // namespace

std::string version_line() {
  const auto& b = build_info();
  return fmt::format("fusekit {} (commit {}), CUDA {}.{}, machine code {}", b.version, b.commit,
                     b.cuda_runtime_version / kCudaMajor, b.cuda_runtime_version % kCudaMajor / kCudaMinor, b.archs);
}

void add_version_command(CLI::App& app, Commands& commands) {
  auto* sub = app.add_subcommand("version", "print the build: version, commit, CUDA runtime and machine code");
  commands.push_back({sub, [] {
    fmt::print("{}\n", version_line());
    return 0;
  }});
}

}  // namespace fusekit::tools
