#pragma once
// Fused row softmax backward over the last dimension, given the forward's output y
// (fusekit/softmax.hpp, with the same scale):
//   dx = scale · y ⊙ (dy − Σ_j dy·y)
// y and dy are read once and dx written once. Masked entries (y = 0) get dx = 0, and a fully
// masked row (y all 0) gets dx all 0. Tensors are [rows, n] or [batch, rows, n], unit innermost
// stride, any row and batch stride, f32/f16/bf16 (y, dy and dx alike), math in f32. Rows of
// 1 … 262144 elements (f32: 131072) on sm_90, where thread-block clusters split long rows
// (16384 / 8192 on sm_80), for rows of whole 16-byte aligned vectors. Other rows (odd lengths or
// strides) whose tensors start each row alike are read by chunks shifted to the row: 262137 /
// 131069 (16377 / 8189 on sm_80). Rows whose tensors start differently take element-by-element
// kernels: 131072 / 65536 on sm_90 and half of the vector rows' on sm_80.
#include <cuda_runtime_api.h>

#include "fusekit/tensor.hpp"

namespace fusekit {

struct SoftmaxBackwardArgs {
  TensorView y;   // the forward's output, [rows, n] or [batch, rows, n]
  TensorView dy;  // y's shape and dtype
  TensorView dx;  // y's shape and dtype (may alias dy)
  float scale = 1.0f;  // the forward's scale on its input
};

void softmax_backward(const SoftmaxBackwardArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
