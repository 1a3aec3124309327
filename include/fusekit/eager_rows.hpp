#pragma once
// The eager baseline of the fused row ops (fusekit/norm.hpp, fusekit/softmax.hpp): one simple
// kernel per op, each reading its inputs from memory and writing its output, as eager execution
// runs a norm or a softmax written out of primitives. Rank-2 [rows, n] tensors of one dtype
// (f32, f16, bf16; any row stride); per-row statistics are f32 [rows].
#include <cuda_runtime_api.h>

#include "fusekit/norm.hpp"
#include "fusekit/softmax.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit::eager {

// mean[i] = Σ_j x/n (LayerNorm; RMSNorm: no mean);  rstd[i] = 1/sqrt(Σ_j x²/n − mean² + eps)
void row_moments(NormKind kind, const TensorView& x, const TensorView& mean, const TensorView& rstd, float eps,
                 cudaStream_t stream = nullptr);
// y = (x − mean[i])·rstd[i]   (mean empty: 0)
void normalize(const TensorView& x, const TensorView& mean, const TensorView& rstd, const TensorView& y,
               cudaStream_t stream = nullptr);
// y = x·w[j] + b[j]   (w empty: 1, b empty: 0)
void affine(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& y,
            cudaStream_t stream = nullptr);
// y = x + r
void add(const TensorView& x, const TensorView& r, const TensorView& y, cudaStream_t stream = nullptr);

// s = scale·x, −∞ where the causal mask hides the entry (or x is −∞)
void scale_mask(const TensorView& x, float scale, Causal causal, const TensorView& s, cudaStream_t stream = nullptr);
// max[i] = max_j s[i,j]
void row_max(const TensorView& s, const TensorView& max, cudaStream_t stream = nullptr);
// sum[i] = Σ_j exp(s[i,j] − max[i])
void row_exp_sum(const TensorView& s, const TensorView& max, const TensorView& sum, cudaStream_t stream = nullptr);
// y = exp(s − max[i]) / sum[i]   (a row whose max is −∞: 0)
void exp_normalize(const TensorView& s, const TensorView& max, const TensorView& sum, const TensorView& y,
                   cudaStream_t stream = nullptr);

}  // namespace fusekit::eager
