#pragma once
// amax = max |x| over a tensor (or a row), as the fp8 quantizing kernels record it, with NaN
// kept: a NaN anywhere makes the amax NaN, so that the scaling recipe that reads it sees the NaN
// instead of the largest finite value (fmaxf would drop it). Every kernel that records an amax
// (the norm quantize, the pointwise chain, the portable and Hopper GEMMs) takes these.
// NOTE: |x| is non-negative or +NaN, and such floats order like their bit patterns taken as
// signed integers, +NaN above +inf: the warp's max is one integer redux (sm_80+) and the
// tensor's one integer atomicMax, both NaN-keeping without a float comparison.

#include "fusekit/device/row/row_config.hpp"

namespace fusekit::device {

// max(acc, b) of two non-negative partial maxima, NaN if either is (one FMNMX.NAN, sm_80+).
__device__ __forceinline__ float amax_join(float acc, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(acc), "f"(b));
  return r;
}

// max(acc, |x|), NaN if either is (ptxas folds the |x| into the FMNMX.NAN: SASS sm_90a).
__device__ __forceinline__ float amax_step(float acc, float x) { return amax_join(acc, fabsf(x)); }

// The max of the warp's values (non-negative or NaN), in every lane; every lane takes part.
__device__ __forceinline__ float warp_amax(float v) {
  return __int_as_float(__reduce_max_sync(kFullWarpMask, __float_as_int(v)));
}

// *address = max(*address, value) for a non-negative or NaN value (the caller zeroes it first).
__device__ __forceinline__ void atomic_amax(float* address, float value) {
  atomicMax(reinterpret_cast<int*>(address), __float_as_int(value));
}

// *address = max(*address, the warp's values): one atomic per warp, every lane taking part.
__device__ __forceinline__ void warp_atomic_amax(float* address, float value) {
  const float warp_max = warp_amax(value);
  if (threadIdx.x % kWarpThreads == 0) atomic_amax(address, warp_max);
}

// atomic_amax, skipped where the amax holds as much already (a load from L2 first): a tensor's
// rows take an atomic only while its running max grows (a few times over many rows), not one
// each. A stale load only adds an atomic: the amax never decreases. The persistent norm kernels
// filter by their CTA's running max in shared memory instead (norm_quantize.cuh), where no row
// waits on L2.
// NOTE: measured on an H100 (session 48, bf16, a per-tensor scale and its amax recorded, GB/s):
// with an atomic per row, LayerNorm → e4m3 ran 1827–1837 at 131072×1024 and 2688–2777 at
// 32768×4096 (2964–2978 with a scale per row and no amax); filtered (and the eight-chunk rows'
// parts per warp), 2781 and 2923–2964.
__device__ __forceinline__ void filtered_atomic_amax(float* address, float value) {
  const int bits = __float_as_int(value);
  if (bits > __ldcg(reinterpret_cast<const int*>(address))) atomicMax(reinterpret_cast<int*>(address), bits);
}

}  // namespace fusekit::device
