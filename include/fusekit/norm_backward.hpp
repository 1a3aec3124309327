#pragma once
// Fused LayerNorm and RMSNorm backward over the last dimension, given the forward's input x,
// weight and saved statistics (fusekit/norm.hpp):
//   x̂ = (x − mean)·rstd,  g = dy·w
//   LayerNorm: dx = rstd·(g − mean(g) − x̂·mean(g·x̂));   RMSNorm: dx = rstd·(g − x̂·mean(g·x̂))
//   dweight = Σ_rows dy·x̂,  dbias = Σ_rows dy
// x and dy are read once and dx written once. The parameter gradients are reduced over rows
// without atomics: per-block partial sums go to a caller-provided workspace and a second kernel
// adds them per column in a fixed order, so results are bit-identical run to run (for one
// device and shape). Plan, then run: size the workspace once with norm_backward_workspace_bytes,
// allocate it, and pass it to every call; a call allocates nothing (CUDA-graph safe).
// Tensors are [rows, n] or [batch, rows, n] with unit innermost stride and any row (and batch)
// stride; x, dy, dx, weight, dweight and dbias share one dtype (f32, f16 or bf16); math is f32.
// Row lengths 1 … 262144 (f16/bf16) or 131072 (f32) on sm_90 (thread-block clusters of up to 16
// CTAs split long rows), 8192 / 4096 on sm_80, for rows of whole 16-byte aligned vectors; other
// rows (odd lengths or strides) take element-by-element kernels: 65536 / 32768 on sm_90, half of
// the vector rows' on sm_80. Every argument is
// validated before any launch; errors name the argument, the expected and the actual value.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fusekit/dtype.hpp"
#include "fusekit/norm.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit {

struct NormBackwardArgs {
  NormKind kind = NormKind::RmsNorm;
  TensorView x;          // the forward's input, [rows, n] or [batch, rows, n]
  TensorView dy;         // x's shape and dtype
  TensorView weight;     // [n], x's dtype; empty: w = 1
  TensorView mean;       // f32, one per row, packed: the forward's (LayerNorm; empty for RMSNorm)
  TensorView rstd;       // f32, one per row, packed: the forward's
  TensorView dx;         // x's shape and dtype (may alias dy)
  TensorView dweight;    // [n], x's dtype; empty: not computed
  TensorView dbias;      // [n], x's dtype; empty: not computed
  TensorView workspace;  // packed, 16-byte aligned, at least norm_backward_workspace_bytes;
                         // may be empty when neither dweight nor dbias is asked for
};

// The workspace bytes norm_backward needs for rows of `n` elements of `dtype` (`rows` counts
// every row, batches flattened) on the current device.
std::size_t norm_backward_workspace_bytes(std::int64_t rows, std::int64_t n, DType dtype);

void norm_backward(const NormBackwardArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
