#pragma once
// Activation functions on float, shared by every device code path.
#include <cuda_runtime.h>

namespace fusekit::device {

inline constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluCubic = 0.044715f;              // the tanh form's cubic coefficient

// gelu(x) = ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

// tanh(√(2/π)·(x + 0.044715·x³)), the gate of gelu_tanh, by the hardware tanh (tanh.approx.f32,
// sm_75+: about 2^-11 relative error), its argument as x·(√(2/π) + √(2/π)·0.044715·x²): four
// instructions (FMUL, FFMA, FMUL, MUFU).
// NOTE: the accurate tanhf is a dozen instructions and made the pointwise chain issue-bound.
__device__ __forceinline__ float gelu_tanh_gate_fast(float x) {
  constexpr float kInner = kSqrt2OverPi * kGeluCubic;
  const float u = x * fmaf(x * x, kInner, kSqrt2OverPi);
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
  return t;
}

// gelu_tanh with the hardware tanh, for results rounded to a 16-bit type, whose half-ulp (2^-9
// for bf16, 2^-12 for f16) it stays near: ½x + ½x·t, six instructions against eight for the
// textbook form.
__device__ __forceinline__ float gelu_tanh_fast(float x) {
  const float t = gelu_tanh_gate_fast(x);
  const float half_x = 0.5f * x;
  return fmaf(half_x, t, half_x);
}

// gelu_tanh_fast(x) + r as x·(½ + ½·t) + r: the residual rides the last FFMA, six instructions
// where gelu_tanh_fast and an add take seven.
__device__ __forceinline__ float gelu_tanh_fast_add(float x, float r) {
  return fmaf(x, fmaf(gelu_tanh_gate_fast(x), 0.5f, 0.5f), r);
}

// gelu(x) = ½·x·(1 + erf(x/√2))
__device__ __forceinline__ float gelu_erf(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
}

// sigmoid-weighted linear unit: silu(x) = x / (1 + e^(−x))
__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

// silu with a fast division (__fdividef: one MUFU.RCP and a multiply, where IEEE division adds
// Newton steps and a range check), for GEMM epilogues that run between a tile's mainloop and the
// next, so that their instructions add to every tile; the difference is far below 16-bit
// rounding. Below x ≈ −87 the denominator passes 2^126 and the quotient is 0, where silu is
// < 1e−35.
__device__ __forceinline__ float silu_fast(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

}  // namespace fusekit::device
