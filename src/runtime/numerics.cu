#include "fusekit/numerics.hpp"

#include <cmath>

#include "fusekit/buffer.hpp"
#include "fusekit/device/runtime/numerics.cuh"
#include "fusekit/error.hpp"

namespace fusekit {

namespace {
constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // grid-stride beyond this: enough to fill any current GPU

int blocks_for(std::int64_t n) {
  return static_cast<int>(std::min<std::int64_t>(kMaxBlocks, (n + kThreads - 1) / kThreads));
}
}  // namespace

void fill_uniform(const TensorView& t, std::uint64_t seed, float lo, float hi, cudaStream_t stream) {
  check::device_tensor("t", t);
  require(lo < hi, "lo", "less than hi", std::to_string(lo) + " >= " + std::to_string(hi));
  const std::int64_t n = t.numel();
  if (n == 0) return;
  device::fill_uniform_kernel<<<blocks_for(n), kThreads, 0, stream>>>(t.data, t.dtype, device::StridedIndex::of(t),
                                                                       n, seed, lo, hi);
  check_launch("fill_uniform_kernel");
}

void poison(const TensorView& t, cudaStream_t stream) {
  check::device_tensor("t", t);
  const std::int64_t n = t.numel();
  if (n == 0) return;
  if (t.is_contiguous()) {
    constexpr int kPoisonByte = 0xFF;
    check_cuda(cudaMemsetAsync(t.data, kPoisonByte, static_cast<std::size_t>(n) * t.element_size(), stream),
               "cudaMemsetAsync (poison)");
    return;
  }
  device::poison_kernel<<<blocks_for(n), kThreads, 0, stream>>>(t.data, t.element_size(), device::StridedIndex::of(t), n);
  check_launch("poison_kernel");
}

Comparison compare(const TensorView& actual, const TensorView& expected, cudaStream_t stream) {
  check::device_tensor("actual", actual);
  check::device_tensor("expected", expected);
  check::same_shape("actual", actual, "expected", expected);
  const std::int64_t n = actual.numel();
  Comparison out;
  if (n == 0) return out;
  DeviceBuffer totals(sizeof(device::CompareTotals));
  check_cuda(cudaMemsetAsync(totals.data(), 0, totals.bytes(), stream), "cudaMemsetAsync");
  device::compare_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      actual.data, actual.dtype, device::StridedIndex::of(actual), expected.data, expected.dtype,
      device::StridedIndex::of(expected), n, static_cast<device::CompareTotals*>(totals.data()));
  check_launch("compare_kernel");
  device::CompareTotals host{};
  check_cuda(cudaMemcpyAsync(&host, totals.data(), sizeof(host), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  out.nonfinite = static_cast<std::int64_t>(host.nonfinite);
  out.max_abs = __builtin_bit_cast(double, host.max_abs_bits);
  out.rel_l2 = host.ref_sq > 0 ? std::sqrt(host.diff_sq / host.ref_sq) : std::sqrt(host.diff_sq);
  return out;
}

std::int64_t count_nonfinite(const TensorView& t, cudaStream_t stream) { return compare(t, t, stream).nonfinite; }

}  // namespace fusekit
