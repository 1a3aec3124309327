#pragma once
// Fused row softmax over the last dimension, one read of x and one write of y, with an optional
// scale on the input and an optional causal mask (aligned bottom-right, as in
// fusekit/reference/softmax.hpp):
//   y[i, j] = exp(s[i,j] − max_j s[i,:]) / Σ_j exp(s[i,j] − max_j s[i,:]),  s = scale·x
// A −∞ input or a masked entry gives 0, and a row with every entry masked or −∞ is all 0 (no NaN).
// Tensors are [rows, n] or [batch, rows, n] (the causal mask then applies per batch), unit
// innermost stride, any row and batch stride, f32/f16/bf16 (x and y alike), math in f32. Rows of
// 1 … 262144 elements (f32 too) on sm_90, where thread-block clusters split long rows (32768 /
// 16384 on sm_80), for rows of whole 16-byte aligned vectors. Other rows (odd lengths or strides)
// whose tensors start each row alike, as contiguous rows and views offset alike do, are read by
// chunks shifted to the row: as long (f32 up to 262141; 32761 / 16381 on sm_80). Rows of x and y
// that start differently take element-by-element kernels: 131072 (16-bit) / 65536 (f32) on sm_90
// and a quarter of the vector rows' on sm_80.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fusekit/reference/softmax.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit {

using reference::Causal;

struct SoftmaxForwardArgs {
  TensorView x;  // [rows, n] or [batch, rows, n]
  TensorView y;  // x's shape and dtype (may alias x)
  float scale = 1.0f;
  Causal causal = Causal::No;
};

void softmax_forward(const SoftmaxForwardArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
