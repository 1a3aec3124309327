#pragma once
// Fused LayerNorm and RMSNorm forward over the last dimension (plain, and after a residual add;
// fp8-quantizing in fusekit/norm_quantize.hpp). Each reads its inputs once and writes its
// outputs once.
//   LayerNorm: y = (x − mean)·rstd·w + b,  rstd = 1/sqrt(mean((x − mean)²) + eps)
//   RMSNorm:   y = x·rstd·w + b,           rstd = 1/sqrt(mean(x²) + eps)
// Tensors are [rows, n] or [batch, rows, n] with unit innermost stride and any row (and batch)
// stride; x, y, residuals, weight and bias share one dtype (f32, f16 or bf16); math is f32. Row
// lengths on sm_90, where thread-block clusters of up to 16 CTAs split long rows: 1 … 262144 for
// rows of whole 16-byte aligned vectors (f32 too), 131072 (16-bit) / 65536 (f32) for other rows
// (odd lengths or strides), which take element-by-element kernels, and 131072 / 65536 for the
// fp8-quantizing norms (fusekit/norm_quantize.hpp); on sm_80 32768 / 16384 for vector rows and a
// quarter of that for others. Every argument is validated before any launch; errors name the
// argument, the expected and the actual value.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fusekit/tensor.hpp"

namespace fusekit {

enum class NormKind : std::uint8_t { LayerNorm, RmsNorm };

struct NormForwardArgs {
  NormKind kind = NormKind::RmsNorm;
  TensorView x;       // [rows, n] or [batch, rows, n]
  TensorView weight;  // [n], x's dtype; empty: w = 1
  TensorView bias;    // [n], x's dtype; empty: b = 0
  TensorView y;       // x's shape and dtype (may alias x)
  TensorView mean;    // f32, one per row (shape [rows] or [batch, rows], packed); empty: not saved
  TensorView rstd;    // f32, one per row; empty: not saved (each of the two is saved when given)
  float eps = 1e-5f;
};

// y = norm(x)·w + b; saves mean (LayerNorm) and rstd for the backward when given.
void norm_forward(const NormForwardArgs& args, cudaStream_t stream = nullptr);

// The pre-norm transformer block's entry: h = x + residual; residual_out = h; y = norm(h)·w + b.
// residual_out may alias residual or x (in place) and norm.y may alias x; no other two arguments
// may share memory (each is rejected by name).
struct AddNormForwardArgs {
  NormForwardArgs norm;     // norm.x is the sublayer output added to the residual stream
  TensorView residual;      // x's shape and dtype
  TensorView residual_out;  // x's shape and dtype: h, rounded to the dtype; y is norm(h) of it
};
void add_norm_forward(const AddNormForwardArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
