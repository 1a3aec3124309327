#pragma once
// CPU reference (double accumulation) for fusekit::gemm with every cuBLASLt epilogue.
// Semantics are those documented in fusekit/gemm.hpp, in row-major terms.
#include <cstdint>
#include <span>
#include <vector>

#include "fusekit/gemm.hpp"
#include "fusekit/reference/host_matrix.hpp"

namespace fusekit::reference {

struct GemmProblem {
  Matrix a;  // stored as given to fusekit::gemm: [M,K] or, with trans_a, [K,M]
  Matrix b;  // [K,N] or, with trans_b, [N,K]
  Matrix c;  // [M,N]; may be empty when beta == 0
  Transpose trans_a = Transpose::No;
  Transpose trans_b = Transpose::No;
  double alpha = 1.0, beta = 0.0;
  double scale_ab = 1.0;  // fp8: a_scale * b_scale, multiplies op(A)·op(B)
  Epilogue epilogue = Epilogue::Default;
  std::vector<double> bias;                // *_BIAS input, length N
  Matrix preact_in;                        // DGELU, DGELU_BGRAD input [M,N]
  std::vector<std::uint8_t> relu_mask_in;  // DRELU, DRELU_BGRAD input, M rows of mask_row_bytes
  std::int64_t mask_row_bytes = 0;         // bytes per mask row (relu_mask_row_bytes(N))
};

struct GemmResult {
  Matrix d;                              // [M,N], before any fp8 d_scale
  Matrix preact;                         // GELU_AUX*: the GELU input [M,N]
  std::vector<std::uint8_t> relu_mask;   // RELU_AUX*: bit (i,j) = byte i*mask_row_bytes + j/8, bit j%8
  std::int64_t mask_row_bytes = 0;
  std::vector<double> bias_grad;         // *BGRAD*: length M (BGRADA) or N (others)
  double amax = 0.0;                     // max |D|
};

// The full problem.
GemmResult gemm(const GemmProblem& p);

// Only the listed rows of D (and of preact / relu_mask), for sampled checks of large shapes;
// epilogues that reduce over rows (DRELU_BGRAD, DGELU_BGRAD, BGRADA, BGRADB's over k is fine)
// still return bias_grad only where it is computable from the rows given: BGRADA for those
// rows, BGRADB in full, none for the D-column sums. Row i of the result is rows[i] of D.
GemmResult gemm_rows(const GemmProblem& p, std::span<const std::int64_t> rows);

// ReLU bit-mask helpers (cuBLASLt layout, row-major terms).
bool relu_mask_bit(std::span<const std::uint8_t> mask, std::int64_t row_bytes, std::int64_t i,
                   std::int64_t j);

}  // namespace fusekit::reference
