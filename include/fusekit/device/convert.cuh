#pragma once
// Element loads and stores between any fusekit dtype and float, for device code.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>

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

// float → fp8 e4m3, rounded to nearest even and saturated to ±448 (NaN stays NaN), as an fp8
// GEMM input wants. sm_89+ converts in hardware; before that, and on the host, from the float's
// bits.
// NOTE: the toolkit's fallback before sm_89 goes through double in an out-of-line call, whose
// saved registers spilled in the quantizing row kernels; this one is inline integer work.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
inline constexpr bool kHardwareE4m3 = true;  // this compilation converts to e4m3 in hardware
#else
inline constexpr bool kHardwareE4m3 = false;
#endif
inline constexpr unsigned kE4m3MaxFiniteBits = 0x7E;  // 448 = 1.75·2^8
inline constexpr unsigned kE4m3NanBits = 0x7F;
__host__ __device__ __forceinline__ __nv_fp8_e4m3 float_to_e4m3(float v) {
  __nv_fp8_e4m3 out;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  out.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
#else
  constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu, kInfBits = 0x7F800000u;
  constexpr std::uint32_t kMaxBits = 0x43E00000u;        // 448.0f
  constexpr std::uint32_t kMinNormalBits = 0x3C800000u;  // 2^-6, e4m3's smallest normal
  constexpr float kSubnormalSteps = 512.0f;              // 2^9: subnormals are multiples of 2^-9
  constexpr int kDroppedBits = 20;                       // 23 mantissa bits → 3
  constexpr std::uint32_t kRebias = (127u - 7u) << 3;    // float exponent bias → e4m3's, in place
  std::uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  const auto sign = static_cast<unsigned>((bits >> 24) & 0x80u);
  const std::uint32_t a = bits & kAbsMask;
  unsigned code;
  if (a > kInfBits) {
    code = kE4m3NanBits;
  } else if (a >= kMaxBits) {
    code = kE4m3MaxFiniteBits;
  } else if (a < kMinNormalBits) {
    float magnitude;
    memcpy(&magnitude, &a, sizeof magnitude);
    // NOTE: scaling by a power of two is exact, and rintf rounds half to even; 8 steps is the
    // smallest normal, whose code is also 8.
    code = static_cast<unsigned>(rintf(magnitude * kSubnormalSteps));
  } else {
    const std::uint32_t half_even = ((a >> kDroppedBits) & 1u) + ((1u << (kDroppedBits - 1)) - 1u);
    code = ((a + half_even) >> kDroppedBits) - kRebias;
    if (code > kE4m3MaxFiniteBits) code = kE4m3MaxFiniteBits;
  }
  out.__x = static_cast<__nv_fp8_storage_t>(sign | code);
#endif
  return out;
}

// Two floats → two e4m3 as float_to_e4m3 each (a in the low byte), one conversion on sm_89+.
__host__ __device__ __forceinline__ __nv_fp8x2_storage_t float2_to_e4m3x2(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
#else
  return static_cast<__nv_fp8x2_storage_t>((float_to_e4m3(b).__x << 8) | float_to_e4m3(a).__x);
#endif
}

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
    case DType::E4M3: static_cast<__nv_fp8_e4m3*>(base)[offset] = float_to_e4m3(v); break;
    case DType::E5M2: static_cast<__nv_fp8_e5m2*>(base)[offset] = __nv_fp8_e5m2(v); break;
    case DType::U8: static_cast<std::uint8_t*>(base)[offset] = static_cast<std::uint8_t>(v); break;
  }
}

}  // namespace fusekit::device
