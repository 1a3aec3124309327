// The seeds' verification checks, judged on measured rungs against the traffic model.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "fusekit/error.hpp"
#include "fusekit/verify.hpp"
#include "units.hpp"

namespace fusekit::verify {

namespace {

using detail::bytes_text;
using detail::count_text;

constexpr std::string_view kLadderSubject = "ladder";

std::string kernel_label(const RungMeasurement& rung, std::size_t i) {
  constexpr std::size_t kNameWidth = 48;
  return fmt::format("{}/{}", rung.name,
                     detail::clip(detail::short_kernel_name(rung.kernels[i].name), kNameWidth));
}

std::string tensor_text(const KernelCounters& k) {
  return fmt::format("{} HMMA, {} GMMA",
                     k.hmma_instructions ? count_text(*k.hmma_instructions) : "n/a",
                     k.gmma_instructions ? count_text(*k.gmma_instructions) : "n/a");
}

Verdict tensor_cores(const std::vector<const RungMeasurement*>& rungs) {
  Verdict v{Check::TensorCores, Outcome::NotApplicable, std::string(kLadderSubject), ""};
  bool counted = false;
  std::vector<std::string> used, unused;
  for (const RungMeasurement* rung : rungs) {
    for (std::size_t i = 0; i < rung->kernels.size(); ++i) {
      const KernelCounters& k = rung->kernels[i];
      counted = counted || k.hmma_instructions || k.gmma_instructions;
      const model::KernelReport* m = rung->modelled(i);
      if (m == nullptr || m->traffic.tensor_flops == 0) continue;
      (k.used_tensor_cores() ? used : unused)
          .push_back(fmt::format("{} ({})", kernel_label(*rung, i), tensor_text(k)));
    }
    // Kernels that do not map one to one onto the model: the rung as a whole must use them.
    const bool mapped = rung->model && rung->model->kernels.size() == rung->kernels.size();
    if (rung->model && !mapped && rung->model->traffic.tensor_flops > 0) {
      const bool any = std::any_of(rung->kernels.begin(), rung->kernels.end(),
                                   [](const KernelCounters& k) { return k.used_tensor_cores(); });
      (any ? used : unused)
          .push_back(fmt::format("rung {} (no kernel-by-kernel model)", rung->name));
    }
  }
  if (!counted) {
    v.detail = "this chip has no tensor-pipe counter fusekit collects";
  } else if (used.empty() && unused.empty()) {
    v.detail = "no measured kernel has modelled matmul flops";
  } else if (!unused.empty()) {
    v.outcome = Outcome::Fail;
    v.detail = fmt::format("no tensor-pipe instructions in: {}", fmt::join(unused, "; "));
  } else {
    v.outcome = Outcome::Pass;
    v.detail =
        fmt::format("tensor-pipe instructions in every kernel with modelled matmul flops: {}",
                    fmt::join(used, "; "));
  }
  return v;
}

const RungMeasurement* find_rung(const std::vector<const RungMeasurement*>& rungs,
                                 std::string_view name) {
  for (const RungMeasurement* r : rungs) {
    if (r->name == name) return r;
  }
  return nullptr;
}

std::vector<Verdict> dram_drops(const std::vector<const RungMeasurement*>& rungs,
                                const Thresholds& t) {
  std::vector<Verdict> verdicts;
  const RungMeasurement* base = find_rung(rungs, t.baseline);
  for (const RungMeasurement* rung : rungs) {
    if (rung->match != ModelMatch::Rung || rung->name == t.baseline) continue;
    Verdict v{Check::DramDrop, Outcome::NotApplicable,
              fmt::format("{} vs {}", rung->name, t.baseline), ""};
    if (base == nullptr || base->match != ModelMatch::Rung) {
      v.detail = fmt::format("baseline rung {} was not measured against the model", t.baseline);
      verdicts.push_back(std::move(v));
      continue;
    }
    const model::RungReport& bm = *base->model;
    const model::RungReport& rm = *rung->model;
    const double modelled =
        static_cast<double>(bm.traffic.bytes()) - static_cast<double>(rm.traffic.bytes());
    const double measured = base->dram_bytes() - rung->dram_bytes();
    const std::string eliminated = fmt::format(
        "{} output crossing(s) and {} of intermediates eliminated",
        bm.output_crossings - rm.output_crossings,
        bytes_text(static_cast<double>(bm.intermediate_bytes() - rm.intermediate_bytes())));
    if (modelled <= 0) {
      v.detail = fmt::format("the model eliminates no traffic ({} modelled)", bytes_text(modelled));
    } else {
      const double off = std::fabs(measured - modelled) / modelled;
      v.outcome = off <= t.dram_tolerance ? Outcome::Pass : Outcome::Fail;
      v.detail = fmt::format(
          "measured drop {} ({} {} − {} {}), modelled {} ({}): off by {:.1f}% (tolerance {:.0f}%)",
          bytes_text(measured), t.baseline, bytes_text(base->dram_bytes()), rung->name,
          bytes_text(rung->dram_bytes()), bytes_text(modelled), eliminated, 100 * off,
          100 * t.dram_tolerance);
    }
    verdicts.push_back(std::move(v));
  }
  if (verdicts.empty()) {
    verdicts.push_back({Check::DramDrop, Outcome::NotApplicable, std::string(kLadderSubject),
                        "no measured rung computes the ladder's output another way"});
  }
  return verdicts;
}

Verdict no_local_traffic(const std::vector<const RungMeasurement*>& rungs) {
  Verdict v{Check::NoLocalTraffic, Outcome::Pass, std::string(kLadderSubject), ""};
  std::vector<std::string> spilled;
  std::size_t kernels = 0;
  std::int64_t max_frame = 0;
  for (const RungMeasurement* rung : rungs) {
    for (std::size_t i = 0; i < rung->kernels.size(); ++i) {
      const KernelCounters& k = rung->kernels[i];
      ++kernels;
      max_frame = std::max(max_frame, k.local_bytes_per_thread);
      if (k.local_bytes() > 0) {
        spilled.push_back(fmt::format("{} ({} loaded, {} stored; {} B/thread local)",
                                      kernel_label(*rung, i), bytes_text(k.local_load_bytes),
                                      bytes_text(k.local_store_bytes), k.local_bytes_per_thread));
      }
    }
  }
  if (kernels == 0) {
    v.outcome = Outcome::NotApplicable;
    v.detail = "no kernel measured";
  } else if (!spilled.empty()) {
    v.outcome = Outcome::Fail;
    v.detail = fmt::format("local-memory traffic in: {}", fmt::join(spilled, "; "));
  } else {
    v.detail = fmt::format(
        "0 B of local loads and stores in {} kernels (largest local frame {} "
        "B/thread)",
        kernels, max_frame);
  }
  return v;
}

Verdict registers(const std::vector<const RungMeasurement*>& rungs, const Thresholds& t) {
  Verdict v{Check::Registers, Outcome::Pass, std::string(kLadderSubject), ""};
  std::vector<std::string> near;
  int most = -1;
  std::string most_label;
  for (const RungMeasurement* rung : rungs) {
    for (std::size_t i = 0; i < rung->kernels.size(); ++i) {
      const KernelCounters& k = rung->kernels[i];
      if (k.registers_per_thread > most) {
        most = k.registers_per_thread;
        most_label = kernel_label(*rung, i);
      }
      if (k.registers_per_thread >= t.max_registers) {
        near.push_back(fmt::format("{} ({})", kernel_label(*rung, i), k.registers_per_thread));
      }
    }
  }
  if (most < 0) {
    v.outcome = Outcome::NotApplicable;
    v.detail = "no kernel measured";
  } else if (!near.empty()) {
    v.outcome = Outcome::Fail;
    v.detail =
        fmt::format("at or above {} registers/thread: {}", t.max_registers, fmt::join(near, "; "));
  } else {
    v.detail =
        fmt::format("most {} registers/thread ({}), below {}", most, most_label, t.max_registers);
  }
  return v;
}

}  // namespace

std::string_view flush_name(Flush flush) {
  switch (flush) {
    case Flush::EachKernel: return "each-kernel";
    case Flush::EachRun: return "each-run";
  }
  return "?";
}

Flush parse_flush(std::string_view name, std::string_view arg) {
  for (Flush f : {Flush::EachKernel, Flush::EachRun}) {
    if (flush_name(f) == name) return f;
  }
  throw_invalid(arg, "each-kernel or each-run", name);
}

std::string_view model_match_name(ModelMatch match) {
  switch (match) {
    case ModelMatch::None: return "none";
    case ModelMatch::Rung: return "rung";
    case ModelMatch::Kernel: return "kernel";
  }
  return "?";
}

std::string_view check_name(Check check) {
  switch (check) {
    case Check::TensorCores: return "tensor cores";
    case Check::DramDrop: return "DRAM drop";
    case Check::NoLocalTraffic: return "no local memory";
    case Check::Registers: return "registers";
  }
  return "?";
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::Pass: return "PASS";
    case Outcome::Fail: return "FAIL";
    case Outcome::NotApplicable: return "n/a";
  }
  return "?";
}

const model::KernelReport* RungMeasurement::modelled(std::size_t i) const {
  if (!model || model->kernels.size() != kernels.size() || i >= kernels.size()) return nullptr;
  return &model->kernels[i];
}

double RungMeasurement::kernel_flops(std::size_t i) const {
  if (const model::KernelReport* m = modelled(i)) return m->traffic.flops();
  return kernels.size() == 1 && i == 0 ? flops_total() : 0.0;
}

double RungMeasurement::flops_total() const { return model ? model->traffic.flops() : flops; }

double RungMeasurement::dram_bytes() const {
  double total = 0;
  for (const KernelCounters& k : kernels) total += k.dram_bytes();
  return total;
}

double RungMeasurement::duration_s() const {
  double total = 0;
  for (const KernelCounters& k : kernels) total += k.duration_s;
  return total;
}

std::vector<Verdict> judge(const std::vector<RungMeasurement>& rungs, const Thresholds& t) {
  std::vector<const RungMeasurement*> measured;
  for (const RungMeasurement& r : rungs) {
    if (!r.kernels.empty()) measured.push_back(&r);
  }
  std::vector<Verdict> verdicts{tensor_cores(measured)};
  for (Verdict& v : dram_drops(measured, t)) verdicts.push_back(std::move(v));
  verdicts.push_back(no_local_traffic(measured));
  verdicts.push_back(registers(measured, t));
  return verdicts;
}

}  // namespace fusekit::verify
