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

}  // namespace fusekit::device
