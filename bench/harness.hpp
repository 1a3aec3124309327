#pragma once
// The benchmark harness: validate, then time, then compare (the llm.c dev/cuda discipline).
// Timing uses CUDA events around each run, after warm-up, with L2 flushed before every run so
// nothing is timed from cache and the stream held (gpu_hold.hpp) so that the events time the
// GPU's work and not the host's; the median of many runs is reported, and the host's time in the
// call beside it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "fusekit/buffer.hpp"
#include "fusekit/reference/host_matrix.hpp"

namespace fusekit::bench {

struct TimingOptions {
  int warmup_runs = 3;
  int min_runs = 20;
  double min_total_ms = 200.0;  // keep timing until both min_runs and this much GPU time
  int max_runs = 1000;
};

// GPU time per run from events (the host's part of the call hidden behind a hold: gpu_hold.hpp),
// and the host's time in the call itself, apart.
struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double host_median_ms = 0;  // the call's host time (checks, descriptors, launches), not waited on
  int runs = 0;
};

// Evicts L2 by reading a zeroed buffer twice its size (outside the timed region).
// NOTE: reading, not writing: a written flush leaves L2 full of dirty lines, and the timed
// kernel then pays for writing back up to 60 MB that are not its own (12% of a 512 MB
// memory-bound run; docs/performance.md).
class L2Flusher {
 public:
  L2Flusher();
  void flush(cudaStream_t stream);

 private:
  DeviceBuffer scratch_;
  DeviceBuffer sink_;
  int blocks_ = 0;
};

Timing time_runs(const std::function<void(cudaStream_t)>& run, const TimingOptions& options, cudaStream_t stream,
                 L2Flusher& flusher);

// Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written.
double measure_copy_bandwidth(cudaStream_t stream);

struct Check {
  bool passed = false;
  double rel_err = 0;       // relative L2 error against the reference
  double bound = 0;         // the bound it must stay under
  std::int64_t nonfinite = 0;
  std::string what;         // e.g. "16 sampled rows vs CPU double reference"
};

// One rung of a ladder: how to run it, and how to check its output against the reference.
struct Rung {
  std::string name;         // e.g. "unfused"
  std::string description;  // e.g. "cuBLASLt GEMM, then bias kernel, then GELU kernel"
  std::function<void(cudaStream_t)> run;
  std::function<void(cudaStream_t)> poison_outputs;
  std::function<Check()> check;
  double flops = 0;            // useful FLOPs (2·M·N·K for a GEMM)
  double min_bytes = 0;        // each input read once, each output written once
  // What the last run ran, asked after the rung is timed: cuBLASLt's algorithm, fused_gemm's
  // backend and why. None where the rung is its own description.
  std::function<std::string()> plan = {};
};

struct RungResult {
  std::string ladder, rung, description, shape, dtype;
  Check check;
  Timing timing;
  double tflops = 0, gbps = 0;
  std::string baseline;        // the rung the ratio is against
  double speedup = 0;          // baseline time / this time
  std::string plan;            // Rung::plan's answer, or empty
};

struct LadderRun {
  std::string ladder, shape, dtype;
  std::string baseline;        // name of the rung the ratios are against
  std::vector<Rung> rungs;
};

// Validates every rung (outputs poisoned first), then times every validated rung; a rung that
// fails validation is reported and not timed.
std::vector<RungResult> run_ladder(LadderRun& ladder, const TimingOptions& options, cudaStream_t stream);

nlohmann::json to_json(const RungResult& r);
std::string format_table(const std::vector<RungResult>& results);

enum class CheckScope : std::uint8_t {
  SampledRows,  // a fixed number of random rows (always including the first and last)
  AllRows,      // every row of every output (slow on the CPU for large shapes)
};

// The rows of an M-row output that a rung's check compares with the CPU reference: all of them,
// or 16 drawn from `seed` including the first and the last, sorted.
std::vector<std::int64_t> rows_to_check(std::int64_t m, CheckScope scope, std::uint64_t seed);

// `seed`, or a fresh 64-bit one drawn from the system when it is 0 (every run new data).
std::uint64_t seed_or_fresh(std::uint64_t seed);

// Relative-L2 bounds by output dtype for checks against a double reference.
double tolerance(DType output);

// The given rows of a row-major [M, N] device tensor, as a host matrix (row k = rows[k]).
reference::Matrix sampled_rows(const TensorView& t, const std::vector<std::int64_t>& rows);
// The given columns of a row-major [M, N] device tensor, as a host matrix [M, columns.size()]
// (column k = columns[k]).
reference::Matrix sampled_columns(const TensorView& t, const std::vector<std::int64_t>& columns);

// `out`'s given rows against `expected` (the same rows of the reference): relative L2 within
// tolerance(dtype) and no NaN or Inf anywhere in `out`.
Check check_rows(const TensorView& out, const std::vector<std::int64_t>& rows, const reference::Matrix& expected,
                 DType dtype, std::string what);

// A quantized output's given rows, each times its scale (out[row]·row_scale[row] ≈ expected),
// against `expected`: relative L2 within tolerance(out.dtype) and no NaN or Inf in `out`.
Check check_scaled_rows(const TensorView& out, const TensorView& row_scale, const std::vector<std::int64_t>& rows,
                        const reference::Matrix& expected, std::string what);

// The same with one scale for the whole tensor (out[row]·scale ≈ expected).
Check check_scaled_rows(const TensorView& out, double scale, const std::vector<std::int64_t>& rows,
                        const reference::Matrix& expected, std::string what);

}  // namespace fusekit::bench
