// CPU reference of the (scaled, optionally causal) row softmax and its backward.
#include "fusekit/reference/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fusekit::reference {

Matrix softmax_forward(const Matrix& x, double scale, Causal causal) {
  constexpr double kMasked = -std::numeric_limits<double>::infinity();
  Matrix y(x.rows, x.cols);
  for (std::int64_t i = 0; i < x.rows; ++i) {
    const auto visible = [&](std::int64_t j) {
      return causal == Causal::No || causal_visible(i, j, x.rows, x.cols);
    };
    // NOTE: a −∞ input stays −∞ whatever the scale (0·−∞ would be NaN).
    const auto logit = [&](std::int64_t j) {
      return !visible(j) || x(i, j) == kMasked ? kMasked : scale * x(i, j);
    };
    double max = kMasked;
    for (std::int64_t j = 0; j < x.cols; ++j) max = std::max(max, logit(j));
    // NOTE: a fully masked row has no distribution; it is defined as all zeros (not NaN).
    if (max == kMasked) continue;
    double sum = 0.0;
    for (std::int64_t j = 0; j < x.cols; ++j) {
      y(i, j) = std::exp(logit(j) - max);
      sum += y(i, j);
    }
    for (std::int64_t j = 0; j < x.cols; ++j) y(i, j) /= sum;
  }
  return y;
}

Matrix softmax_backward(const Matrix& dy, const Matrix& y, double scale) {
  if (dy.rows != y.rows || dy.cols != y.cols)
    throw std::invalid_argument("reference::softmax_backward: dy and y must have the same shape");
  Matrix dx(y.rows, y.cols);
  for (std::int64_t i = 0; i < y.rows; ++i) {
    double dot = 0.0;
    for (std::int64_t j = 0; j < y.cols; ++j) dot += dy(i, j) * y(i, j);
    for (std::int64_t j = 0; j < y.cols; ++j) dx(i, j) = scale * y(i, j) * (dy(i, j) - dot);
  }
  return dx;
}

}  // namespace fusekit::reference
