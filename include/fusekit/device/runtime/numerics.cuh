#pragma once
// Device code behind fusekit/numerics.hpp: counter-based random fill and comparisons.
#include <cstdint>

#include "fusekit/device/convert.cuh"
#include "fusekit/device/strided_index.cuh"

namespace fusekit::device {

// splitmix64: a full-avalanche 64-bit mix, so neighbouring indices give independent values.
__host__ __device__ inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits (exact in float).
__device__ inline float uniform01(std::uint64_t seed, std::int64_t i) {
  constexpr int kMantissaBits = 24;
  constexpr float kScale = 1.0f / static_cast<float>(1u << kMantissaBits);
  const std::uint64_t h = mix64(seed ^ mix64(static_cast<std::uint64_t>(i)));
  return static_cast<float>(h >> (64 - kMantissaBits)) * kScale;
}

__global__ void fill_uniform_kernel(void* data, DType dtype, StridedIndex index, std::int64_t n,
                                    std::uint64_t seed, float lo, float hi) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    store_float(data, dtype, index.offset(i), lo + (hi - lo) * uniform01(seed, i));
}

__global__ void poison_kernel(void* data, std::size_t element_bytes, StridedIndex index, std::int64_t n) {
  constexpr unsigned char kPoisonByte = 0xFF;  // NaN in every float format fusekit has
  auto* bytes = static_cast<unsigned char*>(data);
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    unsigned char* e = bytes + index.offset(i) * element_bytes;
    for (std::size_t b = 0; b < element_bytes; ++b) e[b] = kPoisonByte;
  }
}

struct CompareTotals {
  double diff_sq;
  double ref_sq;
  unsigned long long max_abs_bits;  // a non-negative double's bits order like the double
  unsigned long long nonfinite;
};

__global__ void compare_kernel(const void* actual, DType actual_type, StridedIndex actual_index,
                               const void* expected, DType expected_type, StridedIndex expected_index,
                               std::int64_t n, CompareTotals* totals) {
  double diff_sq = 0, ref_sq = 0, max_abs = 0;
  unsigned long long nonfinite = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const double a = load_float(actual, actual_type, actual_index.offset(i));
    const double e = load_float(expected, expected_type, expected_index.offset(i));
    if (!isfinite(a)) {
      ++nonfinite;
      continue;
    }
    const double d = a - e;
    diff_sq += d * d;
    ref_sq += e * e;
    max_abs = fmax(max_abs, fabs(d));
  }
  constexpr unsigned kFullMask = 0xFFFFFFFFu;
  for (int off = warpSize / 2; off > 0; off /= 2) {
    diff_sq += __shfl_down_sync(kFullMask, diff_sq, off);
    ref_sq += __shfl_down_sync(kFullMask, ref_sq, off);
    max_abs = fmax(max_abs, __shfl_down_sync(kFullMask, max_abs, off));
    nonfinite += __shfl_down_sync(kFullMask, nonfinite, off);
  }
  if (threadIdx.x % warpSize == 0) {
    atomicAdd(&totals->diff_sq, diff_sq);
    atomicAdd(&totals->ref_sq, ref_sq);
    atomicMax(&totals->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(max_abs)));
    atomicAdd(&totals->nonfinite, nonfinite);
  }
}

}  // namespace fusekit::device
