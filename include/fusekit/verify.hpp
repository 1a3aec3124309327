#pragma once
// Proof of fusion from hardware counters: the seeds' "confirm it actually fused" as a library
// feature. `Profiler` runs a piece of GPU work under the CUPTI Range Profiler (auto range: one
// range per kernel; kernel replay; one pass) and returns, per kernel, the DRAM bytes it moved,
// its tensor-pipe instructions, its local-memory traffic, its duration, and (from CUPTI's kernel
// activity records) its registers and local bytes per thread. `judge` compares measured rungs
// with the traffic model (fusekit/model) and returns one verdict per seed check; `report_text`,
// `to_json` and `roofline_svg` render the result.
//
// The L2 is swept before every measured kernel (see Flush). Everything but Profiler is CPU-only:
// the counter configuration image needs only the chip name, so it is built and tested without
// a GPU.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusekit/dtype.hpp"
#include "fusekit/model/roofs.hpp"
#include "fusekit/model/traffic.hpp"

namespace fusekit::verify {

// The CUPTI metrics collected for every kernel, all in one pass. A metric the chip lacks is
// required (the configuration fails) unless marked optional: the tensor-pipe counters differ by
// generation (GMMA exists from Hopper on; HMMA counts HGMMA too on Hopper).
struct Metric {
  std::string_view name;
  bool optional = false;
};
inline constexpr Metric kMetrics[] = {
    {"dram__bytes_read.sum"},
    {"dram__bytes_write.sum"},
    {"sm__inst_executed_pipe_tensor_op_hmma.sum", true},
    {"sm__inst_executed_pipe_tensor_op_gmma.sum", true},
    {"l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"},
    {"l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"},
    {"gpu__time_duration.sum"},
};

// The counter configuration image of the range profiler for one chip.
struct CounterConfig {
  std::string chip;                  // "GH100"
  std::vector<std::string> metrics;  // those of kMetrics the chip has, in kMetrics order
  std::vector<std::uint8_t> image;   // cuptiProfilerHostGetConfigImage
  std::size_t passes = 0;            // replay passes the image needs; fusekit requires 1
};

// Builds the configuration image for `chip` ("GH100", "GA100", ...) with the CUPTI host API:
// no GPU needed. `counter_availability` is the device's availability image when there is one.
// Throws Error(Profiler) naming the CUPTI call and its result, or a required metric the chip
// lacks.
CounterConfig counter_config(std::string_view chip,
                             std::span<const std::uint8_t> counter_availability = {});

// What one kernel did, measured.
struct KernelCounters {
  std::string name;  // demangled
  int registers_per_thread = 0;
  std::int64_t local_bytes_per_thread = 0;  // stack frame and spill slots the compiler reserved
  double dram_read_bytes = 0;
  double dram_write_bytes = 0;  // written to DRAM while the kernel ran
  // Its dirty L2 lines written back after it ended, measured in the L2 sweep that follows it.
  // NOTE: L2 is write-back: an output smaller than L2 may leave the chip only when something
  // evicts it, after the kernel's range has closed. Nsight Compute reports such a kernel's
  // dram__bytes_write without these bytes; fusekit keeps the two apart and counts both.
  double dram_writeback_bytes = 0;
  std::optional<double> hmma_instructions;  // empty: the chip has no such counter
  std::optional<double> gmma_instructions;
  double local_load_bytes = 0;
  double local_store_bytes = 0;
  double duration_s = 0;
  bool cold_l2 = false;  // an L2 sweep ran right before it

  double dram_bytes() const { return dram_read_bytes + dram_write_bytes + dram_writeback_bytes; }
  double local_bytes() const { return local_load_bytes + local_store_bytes; }
  bool used_tensor_cores() const {
    return hmma_instructions.value_or(0) > 0 || gmma_instructions.value_or(0) > 0;
  }
};

// How the L2 is emptied between measured kernels. A sweep is fusekit's own kernel that reads a
// buffer several times the L2's size: it leaves nothing of the work in L2, and the dirty lines
// it evicts are written back inside its own range, where they are counted as the preceding
// kernel's dram_writeback_bytes.
enum class Flush : std::uint8_t {
  EachKernel,  // a sweep before every kernel (inserted by a CUPTI launch callback) and after the
               // last
  EachRun,     // one sweep before the work and one after it: kernels of one run share the L2
};
std::string_view flush_name(Flush flush);  // "each-kernel", "each-run"
Flush parse_flush(std::string_view name, std::string_view arg = "flush");

// The range profiler on the current device. One Profiler at a time in a process (CUPTI's
// callback and activity hooks are process-wide). Throws Error(NoDevice) without a device, and
// Error(Profiler) when CUPTI refuses, naming the fix where there is one (counters restricted to
// administrators: run as root or set NVreg_RestrictProfilingToAdminUsers=0).
class Profiler {
 public:
  explicit Profiler(Flush flush = Flush::EachKernel);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Runs `run` on `stream` twice: once under kernel activity tracing (names, registers, local
  // bytes) and once under the range profiler (counters). Returns the work's kernels in execution
  // order, sweeps left out. `run` must launch the same kernels each time.
  std::vector<KernelCounters> profile(const std::function<void(cudaStream_t)>& run,
                                      cudaStream_t stream);

  const std::string& chip() const;  // as CUPTI names it: "GH100"
  Flush flush() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A rung of a ladder, measured, and what the model says about it.
enum class ModelMatch : std::uint8_t {
  None,    // the model has nothing for this rung: no modelled bytes, no DRAM verdict
  Rung,    // the model's rung of the same name: the same output, computed another way
  Kernel,  // one of the model's kernels run alone (a peer line such as the plain GEMM)
};
std::string_view model_match_name(ModelMatch match);

struct RungMeasurement {
  std::string name;
  std::string description;
  std::vector<KernelCounters> kernels;
  ModelMatch match = ModelMatch::None;
  std::optional<model::RungReport> model;  // present unless match is None
  double flops = 0;                        // useful flops of the rung, used when there is no model

  // The model's kernel for measured kernel `i`: kernels map one to one, in order, when the
  // rung launched as many kernels as the model lists; otherwise none do.
  const model::KernelReport* modelled(std::size_t i) const;
  // Flops of measured kernel `i`: its modelled flops; the rung's when it is the only kernel;
  // otherwise 0 (unknown).
  double kernel_flops(std::size_t i) const;
  double flops_total() const;  // the model's when there is one, else `flops`
  double dram_bytes() const;   // Σ kernels' dram_bytes()
  double duration_s() const;   // Σ kernels' durations
};

enum class Check : std::uint8_t {
  TensorCores,  // "sm__inst_executed_pipe_tensor.sum is zero → you never touched a tensor core"
  DramDrop,     // "dram__bytes.sum should drop by roughly the number of intermediates"
  NoLocalTraffic,  // "the compiler spills to local memory — HBM wearing a disguise"
  Registers,       // "launch__registers_per_thread near 255 → you are about to spill"
};
enum class Outcome : std::uint8_t { Pass, Fail, NotApplicable };
std::string_view check_name(Check check);        // "tensor cores", "DRAM drop", ...
std::string_view outcome_name(Outcome outcome);  // "PASS", "FAIL", "n/a"

struct Verdict {
  Check check = Check::TensorCores;
  Outcome outcome = Outcome::NotApplicable;
  std::string subject;  // "ladder", or "cublaslt vs unfused"
  std::string detail;   // the evidence, in numbers
};

struct Thresholds {
  // |measured drop − modelled drop| ≤ tolerance × modelled drop.
  double dram_tolerance = 0.15;
  // NOTE: 255 is the architectural cap; registers are allocated in steps of 8 per thread, so a
  // kernel at 240 or more is within two steps of it: "near 255".
  int max_registers = 240;  // every kernel must use fewer
  std::string baseline = "unfused";
};

// One verdict per check, and for DramDrop one per rung that the model computes the same output
// with (compared with the baseline rung). A rung without kernels (not run) is left out.
std::vector<Verdict> judge(const std::vector<RungMeasurement>& rungs,
                           const Thresholds& thresholds = {});

// Everything `fusekit verify` reports about one ladder.
struct Report {
  std::string ladder;  // "linear"
  std::string shape;   // "4096x4096x4096"
  DType dtype = DType::BF16;
  std::string device;  // "NVIDIA H200"
  std::string chip;    // "GH100"
  Flush flush = Flush::EachKernel;
  model::Roofs roofs;
  Thresholds thresholds;
  std::vector<RungMeasurement> rungs;
  std::vector<Verdict> verdicts;
};

// Per rung, per kernel and in total: registers, local bytes, DRAM bytes measured and modelled,
// tensor instructions, duration, achieved FLOP/s; then one line per verdict.
std::string report_text(const Report& report);
nlohmann::json to_json(const Report& report);
// A log-log roofline: the DRAM roof rising to the matrix roof of the report's dtype, the fp32
// roof, and every measured kernel as a point at (flops / measured DRAM bytes, flops / duration).
// Kernels with unknown flops, no bytes or no duration are listed under the chart instead.
std::string roofline_svg(const Report& report);

}  // namespace fusekit::verify
