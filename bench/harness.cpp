#include "bench/harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <random>

#include "fusekit/error.hpp"
#include "fusekit/gpu_hold.hpp"
#include "fusekit/l2_sweep.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/transfer.hpp"
#include "fusekit/numerics.hpp"

namespace fusekit::bench {

namespace {
constexpr double kMsPerS = 1e3;
constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr int kL2FlushFactor = 2;
constexpr int kFlushByte = 0x5A;
}  // namespace

L2Flusher::L2Flusher()
    : scratch_(current_device_info().l2_bytes * kL2FlushFactor),
      sink_(sizeof(unsigned int)),
      blocks_(current_device_info().device_sm_count * kL2SweepBlocksPerSm) {
  check_cuda(cudaMemset(scratch_.data(), 0, scratch_.bytes()), "L2 flush buffer");
}

void L2Flusher::flush(cudaStream_t stream) {
  check_cuda(launch_l2_sweep(scratch_.data(), scratch_.bytes(), static_cast<unsigned int*>(sink_.data()), blocks_,
                             stream),
             "L2 flush");
}

namespace {
// The median of `values` (sorts them).
double median_of(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}
}  // namespace

Timing time_runs(const std::function<void(cudaStream_t)>& run, const TimingOptions& options, cudaStream_t stream,
                 L2Flusher& flusher) {
  for (int i = 0; i < options.warmup_runs; ++i) run(stream);
  Event start, stop;
  std::vector<double> times;
  double total = 0;
  std::vector<double> host_times;
  while (static_cast<int>(times.size()) < options.max_runs &&
         (static_cast<int>(times.size()) < options.min_runs || total < options.min_total_ms)) {
    flusher.flush(stream);
    // NOTE: without the hold, the host's part of the call was timed as idle GPU: the Hopper
    // attention rung measured 0.90 ms against its kernel's 0.81 ms (ncu, session 8).
    check_cuda(launch_gpu_hold(kBenchHoldCycles, stream), "hold before a timed run");
    start.record(stream);
    const auto host_start = std::chrono::steady_clock::now();
    run(stream);
    host_times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count());
    stop.record(stream);
    const double ms = stop.elapsed_ms_since(start);
    times.push_back(ms);
    total += ms;
  }
  Timing t;
  t.median_ms = median_of(times);  // sorts times
  t.host_median_ms = median_of(host_times);
  t.runs = static_cast<int>(times.size());
  t.min_ms = times.front();
  t.max_ms = times.back();
  return t;
}

double measure_copy_bandwidth(cudaStream_t stream) {
  constexpr std::size_t kCopyBytes = std::size_t{1} << 30;  // far beyond L2
  constexpr int kCopies = 10;
  DeviceBuffer src(kCopyBytes), dst(kCopyBytes);
  check_cuda(cudaMemsetAsync(src.data(), kFlushByte, kCopyBytes, stream), "memset");
  check_cuda(cudaMemcpyAsync(dst.data(), src.data(), kCopyBytes, cudaMemcpyDeviceToDevice, stream), "warm-up copy");
  Event start, stop;
  start.record(stream);
  for (int i = 0; i < kCopies; ++i)
    check_cuda(cudaMemcpyAsync(dst.data(), src.data(), kCopyBytes, cudaMemcpyDeviceToDevice, stream), "copy");
  stop.record(stream);
  const double s = stop.elapsed_ms_since(start) / kMsPerS;
  return 2.0 * kCopyBytes * kCopies / s;
}

std::vector<RungResult> run_ladder(LadderRun& ladder, const TimingOptions& options, cudaStream_t stream) {
  L2Flusher flusher;
  std::vector<RungResult> results;
  for (auto& rung : ladder.rungs) {
    RungResult r;
    r.ladder = ladder.ladder;
    r.rung = rung.name;
    r.description = rung.description;
    r.shape = ladder.shape;
    r.dtype = ladder.dtype;
    rung.poison_outputs(stream);
    rung.run(stream);
    check_cuda(cudaStreamSynchronize(stream), fmt::format("rung {}", rung.name));
    r.check = rung.check();
    if (r.check.passed) {
      r.timing = time_runs(rung.run, options, stream, flusher);
      const double s = r.timing.median_ms / kMsPerS;
      r.tflops = rung.flops / s / kTera;
      r.gbps = rung.min_bytes / s / kGiga;
    }
    if (rung.plan) r.plan = rung.plan();
    results.push_back(r);
  }
  const auto base = std::find_if(results.begin(), results.end(),
                                 [&](const RungResult& r) { return r.rung == ladder.baseline; });
  for (auto& r : results) {
    r.baseline = ladder.baseline;
    if (base != results.end() && base->check.passed && r.check.passed)
      r.speedup = base->timing.median_ms / r.timing.median_ms;
  }
  return results;
}

nlohmann::json to_json(const RungResult& r) {
  return {{"ladder", r.ladder},
          {"rung", r.rung},
          {"description", r.description},
          {"shape", r.shape},
          {"dtype", r.dtype},
          {"valid", r.check.passed},
          {"check", r.check.what},
          {"rel_err", r.check.rel_err},
          {"bound", r.check.bound},
          {"nonfinite", r.check.nonfinite},
          {"median_ms", r.timing.median_ms},
          {"host_ms", r.timing.host_median_ms},
          {"min_ms", r.timing.min_ms},
          {"max_ms", r.timing.max_ms},
          {"runs", r.timing.runs},
          {"tflops", r.tflops},
          {"gbps_min_bytes", r.gbps},
          {"baseline", r.baseline},
          {"speedup_vs_baseline", r.speedup},
          {"plan", r.plan}};
}

std::string format_table(const std::vector<RungResult>& results) {
  std::string out = fmt::format("{:<8} {:<18} {:<12} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}  {}\n", "ladder", "shape",
                                "rung", "ms", "host ms", "TFLOP/s", "GB/s", "rel_err", "vs base", "check");
  for (const auto& r : results) {
    out += fmt::format("{:<8} {:<18} {:<12} {:>9.4f} {:>9.4f} {:>9.1f} {:>9.1f} {:>10.2e} {:>8.3f}x  {}\n", r.ladder,
                       r.shape, r.rung, r.timing.median_ms, r.timing.host_median_ms, r.tflops, r.gbps, r.check.rel_err,
                       r.speedup,
                       r.check.passed ? "ok" : fmt::format("FAILED (bound {:.1e}, {} non-finite)", r.check.bound,
                                                           r.check.nonfinite));
  }
  // The plans under the table, one line each, so that its columns stay readable.
  for (const auto& r : results)
    if (!r.plan.empty()) out += fmt::format("{:<8} {:<18} {:<12} plan: {}\n", r.ladder, r.shape, r.rung, r.plan);
  return out;
}

std::vector<std::int64_t> rows_to_check(std::int64_t m, CheckScope scope, std::uint64_t seed) {
  constexpr int kSampledRows = 16;
  std::vector<std::int64_t> rows;
  if (scope == CheckScope::AllRows || m <= kSampledRows) {
    for (std::int64_t r = 0; r < m; ++r) rows.push_back(r);
    return rows;
  }
  std::mt19937_64 rng(seed);
  rows = {0, m - 1};
  while (static_cast<int>(rows.size()) < kSampledRows) rows.push_back(static_cast<std::int64_t>(rng() % m));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

std::uint64_t seed_or_fresh(std::uint64_t seed) {
  return seed ? seed : std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32);
}

double tolerance(DType output) {
  // NOTE: bounds on ‖out − ref‖/‖ref‖ a few times the output format's unit roundoff, so a
  // correct kernel passes with margin and an indexing or layout error (O(1) error) cannot.
  switch (output) {
    case DType::F32: return 1e-4;
    case DType::F16: return 2e-3;
    case DType::BF16: return 8e-3;
    case DType::E4M3: return 1e-1;
    case DType::E5M2: return 2e-1;
    case DType::U8: return 0;
  }
  return 0;
}

reference::Matrix sampled_rows(const TensorView& t, const std::vector<std::int64_t>& rows) {
  reference::Matrix m(static_cast<std::int64_t>(rows.size()), t.shape[1]);
  const auto row_bytes = t.strides[0] * static_cast<std::int64_t>(t.element_size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto* base = static_cast<char*>(t.data) + rows[i] * row_bytes;
    const auto v = download(TensorView::matrix(base, t.dtype, 1, t.shape[1], t.strides[0]));
    std::copy(v.begin(), v.end(), m.data.begin() + static_cast<std::ptrdiff_t>(i) * t.shape[1]);
  }
  return m;
}

reference::Matrix sampled_columns(const TensorView& t, const std::vector<std::int64_t>& columns) {
  const std::int64_t rows = t.shape[0], cols = t.shape[1];
  reference::Matrix m(rows, std::ssize(columns));
  // Blocks of whole rows, each one copy and one parallel conversion, of which the columns are
  // kept: a column's own view would copy the whole span from its first element to its last.
  constexpr std::int64_t kBlockElements = std::int64_t{1} << 22;
  const std::int64_t block = std::max<std::int64_t>(1, kBlockElements / cols);
  const auto row_bytes = t.strides[0] * static_cast<std::int64_t>(t.element_size());
  for (std::int64_t first = 0; first < rows; first += block) {
    const std::int64_t count = std::min(block, rows - first);
    auto* base = static_cast<char*>(t.data) + first * row_bytes;
    const auto v = download(TensorView::matrix(base, t.dtype, count, cols, t.strides[0]));
    for (std::int64_t r = 0; r < count; ++r)
      for (std::size_t k = 0; k < columns.size(); ++k)
        m(first + r, static_cast<std::int64_t>(k)) = v[static_cast<std::size_t>(r * cols + columns[k])];
  }
  return m;
}

namespace {

// `got` (rows of an output, NaN and Inf counted in c.nonfinite already) against `expected`.
Check compare_rows(Check c, const reference::Matrix& got, const reference::Matrix& expected) {
  double d = 0, r = 0;
  for (std::size_t e = 0; e < got.data.size(); ++e) {
    if (!std::isfinite(got.data[e])) continue;  // counted in nonfinite already
    d += (got.data[e] - expected.data[e]) * (got.data[e] - expected.data[e]);
    r += expected.data[e] * expected.data[e];
  }
  c.rel_err = std::sqrt(d / std::max(r, std::numeric_limits<double>::min()));
  c.passed = c.nonfinite == 0 && c.rel_err <= c.bound;
  return c;
}

// check_scaled_rows with the scale of each checked row, in the order of `rows`.
Check check_sampled_scaled_rows(const TensorView& out, const std::vector<double>& sampled_scale,
                                const std::vector<std::int64_t>& rows, const reference::Matrix& expected,
                                std::string what) {
  Check c;
  c.bound = tolerance(out.dtype);
  c.nonfinite = count_nonfinite(out);
  c.what = std::move(what);
  auto got = sampled_rows(out, rows);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::int64_t j = 0; j < got.cols; ++j) got(static_cast<std::int64_t>(i), j) *= sampled_scale[i];
  return compare_rows(c, got, expected);
}

}  // namespace

Check check_rows(const TensorView& out, const std::vector<std::int64_t>& rows, const reference::Matrix& expected,
                 DType dtype, std::string what) {
  Check c;
  c.bound = tolerance(dtype);
  c.nonfinite = count_nonfinite(out);
  c.what = std::move(what);
  return compare_rows(c, sampled_rows(out, rows), expected);
}

Check check_scaled_rows(const TensorView& out, const TensorView& row_scale, const std::vector<std::int64_t>& rows,
                        const reference::Matrix& expected, std::string what) {
  const auto scale = download(row_scale);
  std::vector<double> sampled_scale(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) sampled_scale[i] = scale[static_cast<std::size_t>(rows[i])];
  return check_sampled_scaled_rows(out, sampled_scale, rows, expected, std::move(what));
}

Check check_scaled_rows(const TensorView& out, double scale, const std::vector<std::int64_t>& rows,
                        const reference::Matrix& expected, std::string what) {
  return check_sampled_scaled_rows(out, std::vector<double>(rows.size(), scale), rows, expected, std::move(what));
}

}  // namespace fusekit::bench
