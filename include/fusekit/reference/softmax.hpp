#pragma once
// CPU reference (double precision) of the row softmax over the last dimension of a matrix,
// with an optional scale on the input and an optional causal mask.
#include <cstdint>

#include "fusekit/reference/host_matrix.hpp"

namespace fusekit::reference {

enum class Causal : std::uint8_t { No, Yes };

// The causal mask aligned bottom-right: in a rows × cols score matrix, row i may attend to
// column j iff j <= i + (cols − rows), so the last row sees every column. With rows > cols
// the first rows − cols rows see nothing.
constexpr bool causal_visible(std::int64_t i, std::int64_t j, std::int64_t rows,
                              std::int64_t cols) {
  return j <= i + (cols - rows);
}

// y[i, j] = exp(s[i,j] − max_j' s[i,j']) / Σ_j' exp(s[i,j'] − max_j' s[i,j']),  s = scale·x
// A −∞ input or a causally masked entry gives 0; a row with every entry masked or −∞ is all 0.
Matrix softmax_forward(const Matrix& x, double scale = 1.0, Causal causal = Causal::No);

// dx = scale · y ⊙ (dy − rowsum(dy ⊙ y)),  y from softmax_forward with the same scale
Matrix softmax_backward(const Matrix& dy, const Matrix& y, double scale = 1.0);

}  // namespace fusekit::reference
