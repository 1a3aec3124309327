#pragma once
// Element loads and stores between any fusekit dtype and float, for device code.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "fusekit/dtype.hpp"

namespace fusekit::device {

template <class T> struct Float;  // float <-> T conversions
template <> struct Float<float> {
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
template <> struct Float<__half> {
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Float<__nv_bfloat16> {
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// Run-time dtype dispatch for utility kernels that are not on a hot path.
__device__ inline float load_float(const void* base, DType t, std::int64_t offset) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[offset];
    case DType::F16: return __half2float(static_cast<const __half*>(base)[offset]);
    case DType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[offset]);
    case DType::E4M3: return float(static_cast<const __nv_fp8_e4m3*>(base)[offset]);
    case DType::E5M2: return float(static_cast<const __nv_fp8_e5m2*>(base)[offset]);
    case DType::U8: return static_cast<const std::uint8_t*>(base)[offset];
  }
  return 0.0f;
}

__device__ inline void store_float(void* base, DType t, std::int64_t offset, float v) {
  switch (t) {
    case DType::F32: static_cast<float*>(base)[offset] = v; break;
    case DType::F16: static_cast<__half*>(base)[offset] = __float2half_rn(v); break;
    case DType::BF16: static_cast<__nv_bfloat16*>(base)[offset] = __float2bfloat16_rn(v); break;
    case DType::E4M3: static_cast<__nv_fp8_e4m3*>(base)[offset] = __nv_fp8_e4m3(v); break;
    case DType::E5M2: static_cast<__nv_fp8_e5m2*>(base)[offset] = __nv_fp8_e5m2(v); break;
    case DType::U8: static_cast<std::uint8_t*>(base)[offset] = static_cast<std::uint8_t>(v); break;
  }
}

}  // namespace fusekit::device
