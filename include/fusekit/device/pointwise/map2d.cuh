#pragma once
// One elementwise pass over a row-major matrix: y[i,j] = op(x[i,j], bias[j], r[i,j]) in float
// (bias and r optional: a null pointer reads as 0).
// This is the eager, one-kernel-per-op baseline the fused paths are measured against, so it is
// written to run at memory speed: 16-byte loads and stores, grid-stride over vectors.
#include <cstdint>

#include "fusekit/device/convert.cuh"
#include "fusekit/device/vector.cuh"

namespace fusekit::device {

// Requires cols, both row strides and all pointers to be multiples of the vector width.
template <class T, class Op>
__global__ void map2d_vector_kernel(const T* __restrict__ x, std::int64_t ldx, const T* __restrict__ bias,
                                    const T* __restrict__ r, std::int64_t ldr, T* __restrict__ y,
                                    std::int64_t ldy, std::int64_t rows, std::int64_t cols, Op op) {
  using V = Vector<T>;
  const std::int64_t vectors_per_row = cols / V::kElements;
  const std::int64_t total = rows * vectors_per_row;
  for (std::int64_t v = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; v < total;
       v += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = v / vectors_per_row;
    const std::int64_t c = (v - i * vectors_per_row) * V::kElements;
    V in, b, other, out;
    in.raw = *reinterpret_cast<const uint4*>(x + i * ldx + c);
    if (bias) b.raw = *reinterpret_cast<const uint4*>(bias + c);
    if (r) other.raw = *reinterpret_cast<const uint4*>(r + i * ldr + c);
#pragma unroll
    for (int e = 0; e < V::kElements; ++e)
      out.e[e] = Float<T>::store(op(Float<T>::load(in.e[e]), bias ? Float<T>::load(b.e[e]) : 0.0f,
                                    r ? Float<T>::load(other.e[e]) : 0.0f));
    *reinterpret_cast<uint4*>(y + i * ldy + c) = out.raw;
  }
}

// Any shape and alignment, one element per step.
template <class T, class Op>
__global__ void map2d_scalar_kernel(const T* __restrict__ x, std::int64_t ldx, const T* __restrict__ bias,
                                    const T* __restrict__ r, std::int64_t ldr, T* __restrict__ y,
                                    std::int64_t ldy, std::int64_t rows, std::int64_t cols, Op op) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / cols, c = i - row * cols;
    y[row * ldy + c] = Float<T>::store(op(Float<T>::load(x[row * ldx + c]), bias ? Float<T>::load(bias[c]) : 0.0f,
                                          r ? Float<T>::load(r[row * ldr + c]) : 0.0f));
  }
}

}  // namespace fusekit::device
