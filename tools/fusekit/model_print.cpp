#include "tools/fusekit/model_print.hpp"

#include <fmt/format.h>

#include "fusekit/model/traffic.hpp"

namespace fusekit::tools {

namespace {
constexpr double kMega = 1e6;
constexpr double kGiga = 1e9;
constexpr double kUs = 1e6;
constexpr const char* kDatasheetChip = "GH100";
}  // namespace

std::string linear_model_summary(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) {
  const auto ladder = model::linear_ladder(m, n, k, dtype);
  const auto roofs = model::datasheet_roofs(kDatasheetChip);
  std::string out = fmt::format("model linear {}x{}x{} {} ({}):\n", m, n, k, dtype_name(dtype), roofs.source);
  for (const auto& r : model::analyze(ladder, roofs)) {
    out += fmt::format("  {:<10} {} kernel(s)  {:.1f} GFLOP  {:.1f} MB min  output crosses HBM {}x  floor {:.1f} us\n",
                       r.name, r.kernels.size(), r.traffic.flops() / kGiga, r.traffic.bytes() / kMega,
                       r.output_crossings, r.floor_s * kUs);
  }
  return out;
}

}  // namespace fusekit::tools
