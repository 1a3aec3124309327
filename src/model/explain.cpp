// Rendering of the traffic model: `explain` writes the seeds' kind of prose and tables,
// `to_json` the same numbers for tools.
#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "fusekit/model/traffic.hpp"
#include "fusekit/units.hpp"

namespace fusekit::model {

namespace {

using units::seconds_text;
using units::si;

// Whole bytes print without a fraction ("512 B"), as the model counts them.
std::string bytes_text(std::int64_t bytes) { return units::bytes_text(static_cast<double>(bytes)); }

constexpr std::size_t kLeftAlignedColumns = 2;  // kernel name, reads → writes
constexpr std::string_view kIndent = "  ";

std::string times(int count) { return count == 1 ? "1 time" : fmt::format("{} times", count); }

std::string_view role_name(Role role) {
  switch (role) {
    case Role::Input: return "input";
    case Role::Output: return "output";
    case Role::Intermediate: return "intermediate";
  }
  return "?";
}

std::string_view limiter_name(Limiter limiter) {
  switch (limiter) {
    case Limiter::Memory: return "memory";
    case Limiter::Matrix: return "matrix";
    case Limiter::Fp32: return "fp32";
  }
  return "?";
}

std::string shape_text(const Tensor& tensor) {
  return fmt::format("{}", fmt::join(tensor.shape, "×"));
}

std::string names(const std::vector<TensorAccess>& accesses) {
  std::vector<std::string_view> tensors;
  for (const TensorAccess& a : accesses) tensors.push_back(a.tensor);
  return fmt::format("{}", fmt::join(tensors, " "));
}

std::string crossings_list(const RungReport& rung) {
  if (rung.intermediates.empty()) return "none";
  std::vector<std::string> parts;
  for (const Crossings& c : rung.intermediates) {
    parts.push_back(fmt::format("{} {}×", c.tensor, c.count()));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string rung_text(const Ladder& ladder, const RungReport& rung) {
  std::string text = fmt::format("{}: {} kernel{}, {}, {}, {:.1f} FLOP/B, floor {}\n", rung.name,
                                 rung.kernels.size(), rung.kernels.size() == 1 ? "" : "s",
                                 si(rung.traffic.flops(), "FLOP"), bytes_text(rung.traffic.bytes()),
                                 rung.traffic.intensity(), seconds_text(rung.floor_s));

  std::vector<std::vector<std::string>> rows = {
      {"kernel", "reads → writes", "tensor", "other", "bytes", "FLOP/B", "floor", "bound"}};
  for (const KernelReport& k : rung.kernels) {
    rows.push_back({k.name, fmt::format("{} → {}", names(k.reads), names(k.writes)),
                    si(k.traffic.tensor_flops, "FLOP"), si(k.traffic.other_flops, "FLOP"),
                    bytes_text(k.traffic.bytes()), fmt::format("{:.2f}", k.traffic.intensity()),
                    seconds_text(k.floor.seconds), std::string(limiter_name(k.floor.limiter))});
  }
  text += units::table_text(rows, kLeftAlignedColumns);

  for (const Crossings& c : rung.intermediates) {
    text += fmt::format("{}{} ({}, {}) crosses HBM {}: {} write{}, {} read{}\n", kIndent, c.tensor,
                        shape_text(ladder.tensor(c.tensor)), bytes_text(c.bytes), times(c.count()),
                        c.writes, c.writes == 1 ? "" : "s", c.reads, c.reads == 1 ? "" : "s");
  }
  if (rung.intermediates.empty()) text += fmt::format("{}no intermediates\n", kIndent);

  std::vector<std::string_view> memory_bound;
  Traffic memory_traffic;
  for (const KernelReport& k : rung.kernels) {
    if (k.floor.limiter != Limiter::Memory) continue;
    memory_bound.push_back(k.name);
    memory_traffic.tensor_flops += k.traffic.tensor_flops;
    memory_traffic.other_flops += k.traffic.other_flops;
    memory_traffic.bytes_read += k.traffic.bytes_read;
    memory_traffic.bytes_written += k.traffic.bytes_written;
  }
  if (!memory_bound.empty()) {
    text += fmt::format("{}under the memory roof: {}: {} buying {} ({:.2f} FLOP/B)\n", kIndent,
                        fmt::join(memory_bound, " + "), bytes_text(memory_traffic.bytes()),
                        si(memory_traffic.flops(), "FLOP"), memory_traffic.intensity());
  }
  text += fmt::format("{}the {} output crosses HBM {}\n", kIndent,
                      shape_text(ladder.tensor(ladder.output)), times(rung.output_crossings));
  return text;
}

std::string conclusion_text(const Ladder& ladder, const RungReport& base, const RungReport& rung) {
  const Tensor& output = ladder.tensor(ladder.output);
  std::string text =
      fmt::format("{}the {} output crosses HBM {} {}, {} {}", kIndent, shape_text(output),
                  times(base.output_crossings), base.name, times(rung.output_crossings), rung.name);
  const int saved = base.output_crossings - rung.output_crossings;
  if (saved > 0) {
    const std::int64_t output_bytes = ladder.bytes(output);
    text += fmt::format(": {} crossing{} × {} = {} saved", saved, saved == 1 ? "" : "s",
                        bytes_text(output_bytes), bytes_text(saved * output_bytes));
  }
  text += '\n';
  text += fmt::format("{}intermediates: {} {} ({}), {} {} ({})\n", kIndent, base.name,
                      bytes_text(base.intermediate_bytes()), crossings_list(base), rung.name,
                      bytes_text(rung.intermediate_bytes()), crossings_list(rung));
  text += fmt::format(
      "{}{} moves {} against {} {} ({:.2f}× less); floor {} against {} ({:.2f}× lower)\n", kIndent,
      rung.name, bytes_text(rung.traffic.bytes()), bytes_text(base.traffic.bytes()), base.name,
      static_cast<double>(base.traffic.bytes()) / static_cast<double>(rung.traffic.bytes()),
      seconds_text(rung.floor_s), seconds_text(base.floor_s), base.floor_s / rung.floor_s);
  return text;
}

nlohmann::json roofs_json(const Roofs& roofs) {
  return {{"source", roofs.source},
          {"dram_bytes_per_s", roofs.dram_bytes_per_s},
          {"matrix_16bit_flops_per_s", roofs.matrix_16bit_flops_per_s},
          {"matrix_fp8_flops_per_s", roofs.matrix_fp8_flops_per_s
                                         ? nlohmann::json(*roofs.matrix_fp8_flops_per_s)
                                         : nlohmann::json(nullptr)},
          {"fp32_flops_per_s", roofs.fp32_flops_per_s}};
}

nlohmann::json traffic_json(const Traffic& traffic) {
  return {{"tensor_flops", traffic.tensor_flops},
          {"other_flops", traffic.other_flops},
          {"bytes_read", traffic.bytes_read},
          {"bytes_written", traffic.bytes_written},
          {"bytes", traffic.bytes()},
          {"intensity", traffic.intensity()}};
}

nlohmann::json accesses_json(const std::vector<TensorAccess>& accesses) {
  nlohmann::json list = nlohmann::json::array();
  for (const TensorAccess& a : accesses) {
    list.push_back({{"tensor", a.tensor}, {"bytes", a.bytes}, {"role", role_name(a.role)}});
  }
  return list;
}

nlohmann::json rung_json(const RungReport& rung) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelReport& k : rung.kernels) {
    kernels.push_back({{"name", k.name},
                       {"reads", accesses_json(k.reads)},
                       {"writes", accesses_json(k.writes)},
                       {"traffic", traffic_json(k.traffic)},
                       {"floor",
                        {{"seconds", k.floor.seconds},
                         {"memory_s", k.floor.memory_s},
                         {"matrix_s", k.floor.matrix_s},
                         {"fp32_s", k.floor.fp32_s},
                         {"limiter", limiter_name(k.floor.limiter)}}}});
  }
  nlohmann::json intermediates = nlohmann::json::array();
  for (const Crossings& c : rung.intermediates) {
    intermediates.push_back({{"tensor", c.tensor},
                             {"bytes", c.bytes},
                             {"writes", c.writes},
                             {"reads", c.reads},
                             {"crossings", c.count()}});
  }
  return {{"name", rung.name},
          {"kernels", kernels},
          {"traffic", traffic_json(rung.traffic)},
          {"floor_s", rung.floor_s},
          {"intermediates", intermediates},
          {"intermediate_bytes", rung.intermediate_bytes()},
          {"output_crossings", rung.output_crossings}};
}

}  // namespace

std::string explain(const Ladder& ladder, const Roofs& roofs) {
  const double matrix_rate = roofs.matrix_flops_per_s(ladder.dtype);
  std::vector<std::string> dims;
  for (const Dim& d : ladder.dims) dims.push_back(fmt::format("{}={}", d.name, d.extent));

  std::string text = fmt::format("{}: {}\n", ladder.name, ladder.maths);
  text += fmt::format("{}{}, {}\n", kIndent, fmt::join(dims, " "), dtype_name(ladder.dtype));
  text += fmt::format("{}roofs ({}): DRAM {}, {} matmul {}, fp32 {}\n", kIndent, roofs.source,
                      si(roofs.dram_bytes_per_s, "B/s"), dtype_name(ladder.dtype),
                      si(matrix_rate, "FLOP/s"), si(roofs.fp32_flops_per_s, "FLOP/s"));
  text += fmt::format("{}ridges: {:.1f} FLOP/B for {} matmuls, {:.1f} FLOP/B for fp32\n", kIndent,
                      matrix_rate / roofs.dram_bytes_per_s, dtype_name(ladder.dtype),
                      roofs.fp32_flops_per_s / roofs.dram_bytes_per_s);

  const std::vector<RungReport> rungs = analyze(ladder, roofs);
  for (const RungReport& rung : rungs) text += '\n' + rung_text(ladder, rung);
  if (rungs.size() > 1) {
    text += "\nconclusions\n";
    for (std::size_t r = 1; r < rungs.size(); ++r) {
      text += conclusion_text(ladder, rungs.front(), rungs[r]);
    }
  }
  return text;
}

nlohmann::json to_json(const Ladder& ladder, const Roofs& roofs) {
  nlohmann::json dims = nlohmann::json::object();
  for (const Dim& d : ladder.dims) dims[d.name] = d.extent;
  nlohmann::json tensors = nlohmann::json::array();
  for (const Tensor& t : ladder.tensors) {
    tensors.push_back({{"name", t.name},
                       {"shape", t.shape},
                       {"dtype", dtype_name(t.dtype)},
                       {"bytes", ladder.bytes(t)}});
  }
  nlohmann::json rungs = nlohmann::json::array();
  for (const RungReport& rung : analyze(ladder, roofs)) rungs.push_back(rung_json(rung));
  return {{"case", ladder.name},
          {"maths", ladder.maths},
          {"dtype", dtype_name(ladder.dtype)},
          {"dims", dims},
          {"tensors", tensors},
          {"output", ladder.output},
          {"roofs", roofs_json(roofs)},
          {"rungs", rungs}};
}

}  // namespace fusekit::model
