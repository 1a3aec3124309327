// CPU references of LayerNorm / RMSNorm (forward, backward) and residual-add + norm.
#include "fusekit/reference/norm.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "../core/parallel.hpp"

namespace fusekit::reference {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference::norm: " + what);
}

void require_optional_vector(std::span<const double> v, std::int64_t n, const char* name) {
  require(v.empty() || std::ssize(v) == n,
          std::string(name) + " must be empty or have n = " + std::to_string(n) + " entries");
}

double at_or(std::span<const double> v, std::int64_t j, double fallback) {
  return v.empty() ? fallback : v[static_cast<std::size_t>(j)];
}

}  // namespace

NormForward norm_forward(NormKind kind, const Matrix& x, std::span<const double> weight,
                         std::span<const double> bias, double eps) {
  require(x.cols > 0, "x must have at least one column");
  require_optional_vector(weight, x.cols, "weight");
  require_optional_vector(bias, x.cols, "bias");
  const auto n = static_cast<double>(x.cols);

  const auto rows = static_cast<std::size_t>(x.rows);
  NormForward out{Matrix(x.rows, x.cols), std::vector<double>(kind == NormKind::LayerNorm ? rows : 0),
                  std::vector<double>(rows)};
  // Rows apart, each on one thread (the same bits as in order).
  detail::parallel_for(x.rows, x.cols, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t r = first; r < last; ++r) {
      double mean = 0.0;
      if (kind == NormKind::LayerNorm) {
        for (std::int64_t j = 0; j < x.cols; ++j) mean += x(r, j);
        mean /= n;
        out.mean[static_cast<std::size_t>(r)] = mean;
      }
      // NOTE: the second pass sums squares of centred values, which stays accurate when the
      // mean is large compared with the spread (E[x²] − E[x]² would cancel).
      double var = 0.0;
      for (std::int64_t j = 0; j < x.cols; ++j) var += (x(r, j) - mean) * (x(r, j) - mean);
      const double rstd = 1.0 / std::sqrt(var / n + eps);
      out.rstd[static_cast<std::size_t>(r)] = rstd;
      for (std::int64_t j = 0; j < x.cols; ++j)
        out.y(r, j) = (x(r, j) - mean) * rstd * at_or(weight, j, 1.0) + at_or(bias, j, 0.0);
    }
  });
  return out;
}

NormBackward norm_backward(NormKind kind, const Matrix& dy, const Matrix& x,
                           std::span<const double> weight, std::span<const double> mean,
                           std::span<const double> rstd) {
  require(dy.rows == x.rows && dy.cols == x.cols, "dy and x must have the same shape");
  require(x.cols > 0, "x must have at least one column");
  require_optional_vector(weight, x.cols, "weight");
  require(std::ssize(rstd) == x.rows, "rstd must have one entry per row");
  require(kind == NormKind::RmsNorm || std::ssize(mean) == x.rows,
          "mean must have one entry per row for LayerNorm");
  const auto n = static_cast<double>(x.cols);

  NormBackward out{Matrix(x.rows, x.cols), std::vector<double>(static_cast<std::size_t>(x.cols)),
                   std::vector<double>(static_cast<std::size_t>(x.cols))};
  std::vector<double> xhat(static_cast<std::size_t>(x.cols));
  std::vector<double> g(static_cast<std::size_t>(x.cols));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const double mu = kind == NormKind::LayerNorm ? mean[static_cast<std::size_t>(r)] : 0.0;
    const double rs = rstd[static_cast<std::size_t>(r)];
    double mean_g = 0.0, mean_g_xhat = 0.0;
    for (std::int64_t j = 0; j < x.cols; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      xhat[jj] = (x(r, j) - mu) * rs;
      g[jj] = dy(r, j) * at_or(weight, j, 1.0);
      mean_g += g[jj];
      mean_g_xhat += g[jj] * xhat[jj];
      out.dweight[jj] += dy(r, j) * xhat[jj];
      out.dbias[jj] += dy(r, j);
    }
    // NOTE: RMSNorm has no mean to subtract, so the gradient has no mean(g) term.
    mean_g = kind == NormKind::LayerNorm ? mean_g / n : 0.0;
    mean_g_xhat /= n;
    for (std::int64_t j = 0; j < x.cols; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      out.dx(r, j) = rs * (g[jj] - mean_g - xhat[jj] * mean_g_xhat);
    }
  }
  return out;
}

AddNormForward add_norm_forward(NormKind kind, const Matrix& x, const Matrix& residual_in,
                                std::span<const double> weight, std::span<const double> bias,
                                double eps) {
  require(x.rows == residual_in.rows && x.cols == residual_in.cols,
          "x and residual_in must have the same shape");
  Matrix h = x;
  for (std::size_t e = 0; e < h.data.size(); ++e) h.data[e] += residual_in.data[e];
  NormForward normed = norm_forward(kind, h, weight, bias, eps);
  return {std::move(h), std::move(normed)};
}

}  // namespace fusekit::reference
