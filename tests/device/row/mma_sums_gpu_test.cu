// MmaRowSums (device/row/mma_sums.cuh) against double sums: each warp's lanes hold eight chunks of
// eight 16-bit values, and each lane's partial() must be its quad's {Σh, Σh²} on the quad's
// diagonal lane (4g + g/2) and exactly {0, 0} on the other three, so the all-reduce of the
// partials over a row's threads is the row's. One lane's values are 64× the others', so a sum
// that dropped or doubled a lane cannot pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "fusekit/buffer.hpp"
#include "fusekit/device/row/mma_sums.cuh"
#include "fusekit/error.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

constexpr int kChunks = 8;
constexpr int kChunkValues = 8;
constexpr int kWarps = 3;
constexpr int kThreads = kWarps * device::kWarpThreads;
constexpr int kLoudLane = 37;      // warp 1, lane 5: in quad 1, whose diagonal lane is 4
constexpr float kLoudFactor = 64;  // its values against the others'

// Thread t's chunk i is values [(t · kChunks + i) · 8, … + 8).
template <class T>
__global__ void mma_sums_kernel(const T* values, float* sums, float* squares) {
  const int t = static_cast<int>(threadIdx.x);
  const auto* chunks = reinterpret_cast<const device::Pack<T, kChunkValues>*>(values) + t * kChunks;
  device::MmaRowSums<T> row_sums;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) row_sums.add(chunks[i]);
  const device::SumPair partial = row_sums.partial();
  sums[t] = partial.first;
  squares[t] = partial.second;
}

template <class T>
struct Values;
template <>
struct Values<__nv_bfloat16> {
  static __nv_bfloat16 round(float v) { return __float2bfloat16(v); }
  static double value(__nv_bfloat16 v) { return __bfloat162float(v); }
};
template <>
struct Values<__half> {
  static __half round(float v) { return __float2half(v); }
  static double value(__half v) { return __half2float(v); }
};

// Values uniform in ±range (the loud lane's kLoudFactor times that), rounded to T.
template <class T>
void check_quads(float range) {
  FUSEKIT_REQUIRE_GPU();
  const std::uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << ", range " << range);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> draw(-range, range);
  constexpr int kLaneValues = kChunks * kChunkValues;
  std::vector<T> host(static_cast<std::size_t>(kThreads) * kLaneValues);
  for (int t = 0; t < kThreads; ++t)
    for (int v = 0; v < kLaneValues; ++v)
      host[static_cast<std::size_t>(t) * kLaneValues + v] =
          Values<T>::round(draw(rng) * (t == kLoudLane ? kLoudFactor : 1.0f));

  DeviceBuffer values(host.size() * sizeof(T)), sums(kThreads * sizeof(float)), squares(kThreads * sizeof(float));
  check_cuda(cudaMemcpy(values.data(), host.data(), values.bytes(), cudaMemcpyHostToDevice), "values");
  // Poisoned: a lane that wrote nothing reads NaN.
  check_cuda(cudaMemset(sums.data(), 0xFF, sums.bytes()), "sums");
  check_cuda(cudaMemset(squares.data(), 0xFF, squares.bytes()), "squares");
  mma_sums_kernel<T><<<1, kThreads>>>(static_cast<const T*>(values.data()), static_cast<float*>(sums.data()),
                                      static_cast<float*>(squares.data()));
  check_cuda(cudaGetLastError(), "mma_sums_kernel launch");
  check_cuda(cudaDeviceSynchronize(), "mma_sums_kernel");
  std::vector<float> got_sums(kThreads), got_squares(kThreads);
  check_cuda(cudaMemcpy(got_sums.data(), sums.data(), sums.bytes(), cudaMemcpyDeviceToHost), "sums");
  check_cuda(cudaMemcpy(got_squares.data(), squares.data(), squares.bytes(), cudaMemcpyDeviceToHost), "squares");

  for (int quad_start = 0; quad_start < kThreads; quad_start += device::kQuadLanes) {
    double sum = 0, square = 0, magnitude = 0;
    for (int t = quad_start; t < quad_start + device::kQuadLanes; ++t)
      for (int v = 0; v < kLaneValues; ++v) {
        const double h = Values<T>::value(host[static_cast<std::size_t>(t) * kLaneValues + v]);
        sum += h;
        square += h * h;
        magnitude += std::fabs(h);
      }
    const int quad = quad_start % device::kWarpThreads / device::kQuadLanes;
    const int diagonal = quad_start + quad / 2;
    for (int t = quad_start; t < quad_start + device::kQuadLanes; ++t) {
      SCOPED_TRACE(::testing::Message() << "thread " << t);
      if (t != diagonal) {
        EXPECT_EQ(got_sums[t], 0.0f);
        EXPECT_EQ(got_squares[t], 0.0f);
        continue;
      }
      // fp32 accumulation of 256 terms: each addition rounds at most 2^-23 of the running
      // magnitude, bounded by Σ|h| (Σh²) over the quad.
      const double bound = 256 * std::ldexp(1.0, -23);
      EXPECT_NEAR(got_sums[t], sum, bound * magnitude);
      EXPECT_NEAR(got_squares[t], square, bound * square);
    }
  }
}

TEST(MmaSumsGpu, QuadSumsOnTheDiagonalLaneBf16) { check_quads<__nv_bfloat16>(2.0f); }
TEST(MmaSumsGpu, QuadSumsOnTheDiagonalLaneF16) { check_quads<__half>(2.0f); }
// Values up to 2048 (the loud lane's up to 2^17, squares up to 2^34): bf16's range, not f16's.
TEST(MmaSumsGpu, QuadSumsOfLargeValuesBf16) { check_quads<__nv_bfloat16>(2048.0f); }

}  // namespace
}  // namespace fusekit
