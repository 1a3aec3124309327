#include "fusekit/units.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace fusekit::units {

namespace {
constexpr double kSiStep = 1000;
constexpr std::string_view kSiPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
constexpr double kBinaryStep = 1024;
constexpr std::string_view kBinaryUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
struct TimeUnit {
  double per_second;
  std::string_view name;
};
constexpr TimeUnit kTimeUnits[] = {{1, "s"}, {1e3, "ms"}, {1e6, "µs"}, {1e9, "ns"}};
}  // namespace

std::string si(double value, std::string_view unit) {
  if (value == 0) return fmt::format("0 {}", unit);
  std::size_t prefix = 0;
  while (std::fabs(value) >= kSiStep && prefix + 1 < std::size(kSiPrefixes)) {
    value /= kSiStep;
    ++prefix;
  }
  return fmt::format("{:.1f} {}{}", value, kSiPrefixes[prefix], unit);
}

std::string bytes_text(double bytes) {
  if (std::fabs(bytes) < kBinaryStep) return fmt::format("{:.0f} B", bytes);
  std::size_t unit = 0;
  while (std::fabs(bytes) >= kBinaryStep && unit + 1 < std::size(kBinaryUnits)) {
    bytes /= kBinaryStep;
    ++unit;
  }
  return fmt::format("{:.1f} {}", bytes, kBinaryUnits[unit]);
}

std::string seconds_text(double seconds) {
  if (seconds == 0) return "0 s";
  for (const TimeUnit& unit : kTimeUnits) {
    if (seconds * unit.per_second >= 1) {
      return fmt::format("{:.1f} {}", seconds * unit.per_second, unit.name);
    }
  }
  const TimeUnit& finest = kTimeUnits[std::size(kTimeUnits) - 1];
  return fmt::format("{:.1f} {}", seconds * finest.per_second, finest.name);
}

std::string count_text(double count) {
  if (count < kSiStep) return fmt::format("{:.0f}", count);
  std::size_t prefix = 0;
  while (count >= kSiStep && prefix + 1 < std::size(kSiPrefixes)) {
    count /= kSiStep;
    ++prefix;
  }
  return fmt::format("{:.2f}{}", count, kSiPrefixes[prefix]);
}

}  // namespace fusekit::units
