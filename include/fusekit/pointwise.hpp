#pragma once
// Single-op elementwise kernels over row-major matrices: the unfused chain that eager execution
// runs after a GEMM, and the baseline every fused path is measured against.
#include <cuda_runtime_api.h>

#include "fusekit/tensor.hpp"

namespace fusekit {

// y[i,j] = x[i,j] + bias[j]      (x, y: [M,N] f32/f16/bf16; bias: [N], same dtype; y may alias x)
void add_bias(const TensorView& x, const TensorView& bias, const TensorView& y, cudaStream_t stream = nullptr);

// y = gelu(x), tanh form          (x, y: [M,N] f32/f16/bf16; y may alias x)
void gelu(const TensorView& x, const TensorView& y, cudaStream_t stream = nullptr);

// y = x + r                      (x, r, y: [M,N] f32/f16/bf16, one dtype; y may alias x or r)
void add(const TensorView& x, const TensorView& r, const TensorView& y, cudaStream_t stream = nullptr);

}  // namespace fusekit
