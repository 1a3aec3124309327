#pragma once
// CPU references (double precision) of LayerNorm and RMSNorm over the last dimension of a
// [rows, n] matrix, forward and backward, and of the fused residual-add + norm.
//   LayerNorm: y = (x − mean)·rstd·w + b,  rstd = 1/sqrt(mean((x − mean)²) + eps)
//   RMSNorm:   y = x·rstd·w + b,           rstd = 1/sqrt(mean(x²) + eps)
// An empty weight means w = 1, an empty bias means b = 0 (RMSNorm usually has none).
#include <cstdint>
#include <span>
#include <vector>

#include "fusekit/norm.hpp"
#include "fusekit/reference/host_matrix.hpp"

namespace fusekit::reference {

// NOTE: NormKind is fusekit::NormKind (fusekit/norm.hpp, declarations only), so a GPU test
// passes the same value to the kernel and to its reference.

struct NormForward {
  Matrix y;                  // [rows, n]
  std::vector<double> mean;  // per row; empty for RMSNorm
  std::vector<double> rstd;  // per row
};

// y = norm(x)·weight + bias, statistics in two passes.
NormForward norm_forward(NormKind kind, const Matrix& x, std::span<const double> weight,
                         std::span<const double> bias, double eps);

struct NormBackward {
  Matrix dx;                    // [rows, n]
  std::vector<double> dweight;  // [n]: Σ_rows dy·x̂ (the gradient of w, also when w was empty)
  std::vector<double> dbias;    // [n]: Σ_rows dy     (the gradient of b, also when b was empty)
};

// With x̂ the normalised x and g = dy·w:
//   LayerNorm: dx = rstd·(g − mean(g) − x̂·mean(g·x̂));   RMSNorm: dx = rstd·(g − x̂·mean(g·x̂)).
// `mean` and `rstd` are the forward's (mean is ignored for RMSNorm).
NormBackward norm_backward(NormKind kind, const Matrix& dy, const Matrix& x,
                           std::span<const double> weight, std::span<const double> mean,
                           std::span<const double> rstd);

struct AddNormForward {
  Matrix residual;   // h = x + residual_in, the next layer's residual stream
  NormForward norm;  // norm(h)·weight + bias
};

// h = x + residual_in;  y = norm(h)·weight + bias
AddNormForward add_norm_forward(NormKind kind, const Matrix& x, const Matrix& residual_in,
                                std::span<const double> weight, std::span<const double> bias,
                                double eps);

}  // namespace fusekit::reference
