// The verify report as text (for people) and JSON (for tools).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fusekit/verify.hpp"
#include "units.hpp"

namespace fusekit::verify {

namespace {

using detail::bytes_text;
using detail::count_text;
using detail::seconds_text;
using detail::si;

constexpr std::size_t kKernelNameWidth = 56;
constexpr std::size_t kLeftAlignedColumns = 2;  // kernel, model kernel
constexpr std::string_view kNone = "—";

std::string optional_count(const std::optional<double>& count) {
  return count ? count_text(*count) : std::string(kNone);
}

double achieved_flops_per_s(double flops, double seconds) {
  return flops > 0 && seconds > 0 ? flops / seconds : 0.0;
}

std::string rung_heading(const RungMeasurement& rung) {
  std::string model = "no model";
  if (rung.match == ModelMatch::Rung) model = fmt::format("model: rung {}", rung.name);
  if (rung.match == ModelMatch::Kernel && rung.model && !rung.model->kernels.empty()) {
    model = fmt::format("model: kernel {} alone", rung.model->kernels.front().name);
  }
  return fmt::format("rung {}: {} ({}, {} kernel{})\n", rung.name, rung.description, model,
                     rung.kernels.size(), rung.kernels.size() == 1 ? "" : "s");
}

std::string rung_text(const RungMeasurement& rung) {
  std::vector<std::vector<std::string>> rows = {
      {"kernel", "model", "regs", "local/thr", "DRAM read", "write", "writeback", "DRAM total",
       "modelled", "meas/model", "HMMA", "GMMA", "time", "FLOP/s"}};
  double read = 0, write = 0, writeback = 0, hmma = 0, gmma = 0, local = 0;
  for (std::size_t i = 0; i < rung.kernels.size(); ++i) {
    const KernelCounters& k = rung.kernels[i];
    const model::KernelReport* m = rung.modelled(i);
    const double modelled = m ? static_cast<double>(m->traffic.bytes()) : 0.0;
    read += k.dram_read_bytes;
    write += k.dram_write_bytes;
    writeback += k.dram_writeback_bytes;
    hmma += k.hmma_instructions.value_or(0);
    gmma += k.gmma_instructions.value_or(0);
    local += k.local_bytes();
    rows.push_back(
        {detail::clip(detail::short_kernel_name(k.name), kKernelNameWidth),
         m ? m->name : std::string(kNone), fmt::format("{}", k.registers_per_thread),
         fmt::format("{} B", k.local_bytes_per_thread), bytes_text(k.dram_read_bytes),
         bytes_text(k.dram_write_bytes), bytes_text(k.dram_writeback_bytes),
         bytes_text(k.dram_bytes()), m ? bytes_text(modelled) : std::string(kNone),
         m && modelled > 0 ? fmt::format("{:.2f}", k.dram_bytes() / modelled) : std::string(kNone),
         optional_count(k.hmma_instructions), optional_count(k.gmma_instructions),
         seconds_text(k.duration_s),
         rung.kernel_flops(i) > 0
             ? si(achieved_flops_per_s(rung.kernel_flops(i), k.duration_s), "FLOP/s")
             : std::string(kNone)});
  }
  const double modelled = rung.model ? static_cast<double>(rung.model->traffic.bytes()) : 0.0;
  rows.push_back({"total", "", "", "", bytes_text(read), bytes_text(write), bytes_text(writeback),
                  bytes_text(rung.dram_bytes()),
                  rung.model ? bytes_text(modelled) : std::string(kNone),
                  rung.model && modelled > 0 ? fmt::format("{:.2f}", rung.dram_bytes() / modelled)
                                             : std::string(kNone),
                  count_text(hmma), count_text(gmma), seconds_text(rung.duration_s()),
                  rung.flops_total() > 0
                      ? si(achieved_flops_per_s(rung.flops_total(), rung.duration_s()), "FLOP/s")
                      : std::string(kNone)});
  std::string text = rung_heading(rung) + detail::table_text(rows, kLeftAlignedColumns);
  if (local > 0) text += fmt::format("  local-memory traffic: {}\n", bytes_text(local));
  return text;
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json kernel_json(const RungMeasurement& rung, std::size_t i) {
  const KernelCounters& k = rung.kernels[i];
  const model::KernelReport* m = rung.modelled(i);
  const double flops = rung.kernel_flops(i);
  const double bytes = k.dram_bytes();
  return {{"name", k.name},
          {"model_kernel", m ? nlohmann::json(m->name) : nlohmann::json(nullptr)},
          {"registers_per_thread", k.registers_per_thread},
          {"local_bytes_per_thread", k.local_bytes_per_thread},
          {"dram_read_bytes", k.dram_read_bytes},
          {"dram_write_bytes", k.dram_write_bytes},
          {"dram_writeback_bytes", k.dram_writeback_bytes},
          {"dram_bytes", bytes},
          {"modelled_bytes", m ? nlohmann::json(m->traffic.bytes()) : nlohmann::json(nullptr)},
          {"hmma_instructions", optional_json(k.hmma_instructions)},
          {"gmma_instructions", optional_json(k.gmma_instructions)},
          {"local_load_bytes", k.local_load_bytes},
          {"local_store_bytes", k.local_store_bytes},
          {"duration_s", k.duration_s},
          {"cold_l2", k.cold_l2},
          {"flops", flops > 0 ? nlohmann::json(flops) : nlohmann::json(nullptr)},
          {"flops_per_s", flops > 0 && k.duration_s > 0 ? nlohmann::json(flops / k.duration_s)
                                                        : nlohmann::json(nullptr)},
          {"intensity",
           flops > 0 && bytes > 0 ? nlohmann::json(flops / bytes) : nlohmann::json(nullptr)}};
}

nlohmann::json rung_json(const RungMeasurement& rung) {
  nlohmann::json kernels = nlohmann::json::array();
  for (std::size_t i = 0; i < rung.kernels.size(); ++i) kernels.push_back(kernel_json(rung, i));
  nlohmann::json model = nullptr;
  if (rung.model) {
    model = {{"bytes", rung.model->traffic.bytes()},
             {"flops", rung.model->traffic.flops()},
             {"output_crossings", rung.model->output_crossings},
             {"intermediate_bytes", rung.model->intermediate_bytes()},
             {"floor_s", rung.model->floor_s}};
  }
  return {{"name", rung.name},
          {"description", rung.description},
          {"model_match", model_match_name(rung.match)},
          {"model", model},
          {"kernels", kernels},
          {"dram_bytes", rung.dram_bytes()},
          {"duration_s", rung.duration_s()},
          {"flops", rung.flops_total()}};
}

}  // namespace

std::string report_text(const Report& r) {
  std::string text = fmt::format("verify {} {} {} on {} ({})\n", r.ladder, r.shape,
                                 dtype_name(r.dtype), r.device, r.chip);
  text += fmt::format(
      "  counters: CUPTI range profiler, auto range, kernel replay, one pass; L2 swept {} ({})\n",
      r.flush == Flush::EachKernel ? "before each kernel" : "before and after the run",
      flush_name(r.flush));
  text +=
      "  DRAM total = read + write + writeback (dirty lines of the kernel that the next L2 "
      "sweep wrote back); modelled = every tensor read or written once\n";
  text += fmt::format("  FLOP/s = modelled flops / measured time; roofs: {}\n", r.roofs.source);
  for (const RungMeasurement& rung : r.rungs) text += '\n' + rung_text(rung);
  text += "\nverdicts\n";
  std::vector<std::vector<std::string>> rows;
  for (const Verdict& v : r.verdicts) {
    rows.push_back({std::string(outcome_name(v.outcome)), std::string(check_name(v.check)),
                    fmt::format("{}: {}", v.subject, v.detail)});
  }
  text += detail::table_text(rows, rows.empty() ? 0 : rows.front().size());
  return text;
}

nlohmann::json to_json(const Report& r) {
  nlohmann::json rungs = nlohmann::json::array();
  for (const RungMeasurement& rung : r.rungs) rungs.push_back(rung_json(rung));
  nlohmann::json verdicts = nlohmann::json::array();
  for (const Verdict& v : r.verdicts) {
    verdicts.push_back({{"check", check_name(v.check)},
                        {"outcome", outcome_name(v.outcome)},
                        {"subject", v.subject},
                        {"detail", v.detail}});
  }
  nlohmann::json metrics = nlohmann::json::array();
  for (const Metric& m : kMetrics) metrics.push_back(m.name);
  return {{"ladder", r.ladder},
          {"shape", r.shape},
          {"dtype", dtype_name(r.dtype)},
          {"device", r.device},
          {"chip", r.chip},
          {"flush", flush_name(r.flush)},
          {"metrics", metrics},
          {"roofs",
           {{"source", r.roofs.source},
            {"dram_bytes_per_s", r.roofs.dram_bytes_per_s},
            {"matrix_flops_per_s", r.roofs.matrix_flops_per_s(r.dtype)},
            {"fp32_flops_per_s", r.roofs.fp32_flops_per_s}}},
          {"thresholds",
           {{"dram_tolerance", r.thresholds.dram_tolerance},
            {"max_registers", r.thresholds.max_registers},
            {"baseline", r.thresholds.baseline}}},
          {"rungs", rungs},
          {"verdicts", verdicts}};
}

}  // namespace fusekit::verify
