#include "fusekit/units.hpp"

#include <fmt/format.h>

#include <algorithm>
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
constexpr unsigned char kUtf8ContinuationMask = 0xC0;
constexpr unsigned char kUtf8ContinuationBits = 0x80;
constexpr std::string_view kTableIndent = "  ";
constexpr std::string_view kTableGap = "  ";

// Whether byte c starts a character (is not a UTF-8 continuation byte).
bool starts_character(char c) {
  return (static_cast<unsigned char>(c) & kUtf8ContinuationMask) != kUtf8ContinuationBits;
}
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

std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), starts_character));
}

std::string clip(std::string_view text, std::size_t width) {
  if (display_width(text) <= width || width == 0) return std::string(text);
  std::string out;
  std::size_t shown = 0;
  for (char c : text) {
    if (starts_character(c) && ++shown > width - 1) break;
    out += c;
  }
  return out + "…";
}

std::string table_text(const std::vector<std::vector<std::string>>& rows, std::size_t left_columns) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string text;
  for (const auto& row : rows) {
    std::string line(kTableIndent);
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string padding(widths[c] - display_width(row[c]), ' ');
      if (c > 0) line += kTableGap;
      line += c < left_columns ? row[c] + padding : padding + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + '\n';
  }
  return text;
}

}  // namespace fusekit::units
