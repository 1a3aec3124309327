// fusekit devices: the GPU, its SMs, memory and measured copy bandwidth.
#include <fmt/format.h>

#include <cstddef>

#include "bench/harness.hpp"
#include "fusekit/runtime.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr std::size_t kKiB = 1024;  // an integer: the opt-in limit prints as whole KiB
constexpr double kTB = 1e12;
constexpr double kKhzPerMhz = 1e3;
}  // namespace

void add_devices_command(CLI::App& app, Commands& commands) {
  auto* sub = app.add_subcommand("devices", "print the GPU, SM count, memory and measured copy bandwidth");
  commands.push_back({sub, [] {
    if (device_count() == 0) return no_device("devices");
    const auto info = current_device_info();
    Stream stream;
    const double bw = bench::measure_copy_bandwidth(stream);
    fmt::print("device {}: {}\n", info.index, info.name);
    fmt::print("  compute capability {}.{} ({}), {} SMs, {:.0f} MHz\n", info.cc_major, info.cc_minor, info.chip(),
               info.device_sm_count, info.clock_khz / kKhzPerMhz);
    fmt::print("  memory {:.1f} GiB, L2 {:.1f} MiB, shared memory per block (opt-in) {} KiB\n",
               info.memory_bytes / kGiB, info.l2_bytes / kMiB, info.smem_per_block_optin / kKiB);
    fmt::print("  measured copy bandwidth {:.2f} TB/s (bytes read + written)\n", bw / kTB);
    return 0;
  }});
}

}  // namespace fusekit::tools
