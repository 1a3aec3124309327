// The norm references: normalised rows have the moments they promise (also far from the
// origin), weight and bias are an affine map after the norm, backward matches central
// differences of the forward, and residual-add + norm is the two steps in a row.
#include "fusekit/reference/norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "reference/random_inputs.hpp"

namespace fusekit::reference {
namespace {

class ReferenceNorm : public RandomInputsTest {};

constexpr NormKind kKinds[] = {NormKind::LayerNorm, NormKind::RmsNorm};
constexpr double kEps = 1e-5;
constexpr double kTolerance = 1e-12;

double row_mean(const Matrix& m, std::int64_t r) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < m.cols; ++j) sum += m(r, j);
  return sum / static_cast<double>(m.cols);
}

double row_mean_square(const Matrix& m, std::int64_t r, double centre) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < m.cols; ++j) sum += (m(r, j) - centre) * (m(r, j) - centre);
  return sum / static_cast<double>(m.cols);
}

TEST_F(ReferenceNorm, LayerNormRowsHaveZeroMeanAndUnitVarianceFarFromTheOrigin) {
  // Row r is 10^(2r) ± 1, up to 1e6 ± 1, where E[x²] − E[x]² would keep only ~4 digits of the
  // variance while the two-pass statistics keep ~10.
  constexpr std::int64_t kRows = 4, kCols = 257;
  constexpr double kFarTolerance = 1e-6;
  Matrix x = random_matrix(kRows, kCols);
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t j = 0; j < kCols; ++j) x(r, j) += std::pow(10.0, 2 * r);
  const NormForward f = norm_forward(NormKind::LayerNorm, x, {}, {}, 0.0);
  for (std::int64_t r = 0; r < kRows; ++r) {
    SCOPED_TRACE(::testing::Message() << "row " << r);
    EXPECT_NEAR(row_mean(f.y, r), 0.0, kFarTolerance);
    EXPECT_NEAR(row_mean_square(f.y, r, 0.0), 1.0, kFarTolerance);
    EXPECT_NEAR(f.mean[r], row_mean(x, r), kTolerance * std::abs(f.mean[r]));
    EXPECT_NEAR(f.rstd[r], 1.0 / std::sqrt(row_mean_square(x, r, f.mean[r])),
                kTolerance * f.rstd[r]);
  }
}

TEST_F(ReferenceNorm, RmsNormRowsHaveUnitMeanSquare) {
  const Matrix x = random_matrix(4, 129);
  const NormForward f = norm_forward(NormKind::RmsNorm, x, {}, {}, 0.0);
  EXPECT_TRUE(f.mean.empty());
  for (std::int64_t r = 0; r < x.rows; ++r) {
    EXPECT_NEAR(row_mean_square(f.y, r, 0.0), 1.0, kTolerance);
    EXPECT_NEAR(f.rstd[r], 1.0 / std::sqrt(row_mean_square(x, r, 0.0)), kTolerance * f.rstd[r]);
  }
}

// Long inputs are split by rows over threads: every row gets the same bits as that row alone
// (a matrix of one row, which runs on the calling thread).
TEST_F(ReferenceNorm, RowsSplitOverThreadsMatchEachRowAlone) {
  constexpr std::int64_t kRows = 37, kCols = 8192;  // 37 · 8192 elements: several threads' worth
  const Matrix x = random_matrix(kRows, kCols);
  const std::vector<double> weight = random_vector(kCols), bias = random_vector(kCols);
  for (NormKind kind : kKinds) {
    SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind));
    const NormForward all = norm_forward(kind, x, weight, bias, kEps);
    for (std::int64_t r = 0; r < kRows; ++r) {
      Matrix row(1, kCols);
      for (std::int64_t j = 0; j < kCols; ++j) row(0, j) = x(r, j);
      const NormForward alone = norm_forward(kind, row, weight, bias, kEps);
      EXPECT_EQ(all.rstd[r], alone.rstd[0]) << "row " << r;
      if (kind == NormKind::LayerNorm) {
        EXPECT_EQ(all.mean[r], alone.mean[0]) << "row " << r;
      }
      for (std::int64_t j = 0; j < kCols; ++j) {
        if (all.y(r, j) != alone.y(0, j)) ADD_FAILURE() << "row " << r << " column " << j;
      }
    }
  }
}

TEST_F(ReferenceNorm, EpsilonBoundsAConstantRow) {
  // x̂ = 0 for a constant row: LayerNorm returns the bias, with rstd = 1/sqrt(eps).
  const Matrix x(2, 8, 3.0);
  const std::vector<double> weight = random_vector(8), bias = random_vector(8);
  const NormForward f = norm_forward(NormKind::LayerNorm, x, weight, bias, kEps);
  EXPECT_DOUBLE_EQ(f.rstd[0], 1.0 / std::sqrt(kEps));
  for (std::int64_t j = 0; j < x.cols; ++j) EXPECT_EQ(f.y(1, j), bias[j]);
}

TEST_F(ReferenceNorm, WeightAndBiasAreAnAffineMapAfterTheNorm) {
  const Matrix x = random_matrix(3, 33);
  const std::vector<double> weight = random_vector(33), bias = random_vector(33);
  for (NormKind kind : kKinds) {
    SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind));
    const NormForward plain = norm_forward(kind, x, {}, {}, kEps);
    const NormForward affine = norm_forward(kind, x, weight, bias, kEps);
    for (std::int64_t r = 0; r < x.rows; ++r)
      for (std::int64_t j = 0; j < x.cols; ++j)
        EXPECT_NEAR(affine.y(r, j), plain.y(r, j) * weight[j] + bias[j], kTolerance);
  }
}

// L(x, w, b) = Σ G ⊙ norm(x)·w + b; every gradient against a central difference of L.
TEST_F(ReferenceNorm, BackwardMatchesCentralDifferences) {
  constexpr std::int64_t kRows = 3, kCols = 11;
  constexpr double kStep = 1e-5, kFdTolerance = 1e-8;
  for (NormKind kind : kKinds) {
    SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind));
    Matrix x = random_matrix(kRows, kCols);
    std::vector<double> weight = random_vector(kCols), bias = random_vector(kCols);
    const Matrix g = random_matrix(kRows, kCols);
    const auto loss = [&] {
      const Matrix y = norm_forward(kind, x, weight, bias, kEps).y;
      double l = 0.0;
      for (std::size_t e = 0; e < y.data.size(); ++e) l += g.data[e] * y.data[e];
      return l;
    };
    const auto central_difference = [&](double& param) {
      const double saved = param;
      param = saved + kStep;
      const double up = loss();
      param = saved - kStep;
      const double down = loss();
      param = saved;
      return (up - down) / (2 * kStep);
    };
    const NormForward f = norm_forward(kind, x, weight, bias, kEps);
    const NormBackward b = norm_backward(kind, g, x, weight, f.mean, f.rstd);
    for (std::size_t e = 0; e < x.data.size(); ++e)
      EXPECT_NEAR(b.dx.data[e], central_difference(x.data[e]), kFdTolerance) << "dx " << e;
    for (std::size_t j = 0; j < weight.size(); ++j) {
      EXPECT_NEAR(b.dweight[j], central_difference(weight[j]), kFdTolerance) << "dweight " << j;
      EXPECT_NEAR(b.dbias[j], central_difference(bias[j]), kFdTolerance) << "dbias " << j;
    }
  }
}

TEST_F(ReferenceNorm, MissingWeightMeansOnes) {
  const Matrix x = random_matrix(3, 17), dy = random_matrix(3, 17);
  const std::vector<double> ones(17, 1.0);
  for (NormKind kind : kKinds) {
    SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind));
    const NormForward f = norm_forward(kind, x, {}, {}, kEps);
    EXPECT_EQ(f.y.data, norm_forward(kind, x, ones, {}, kEps).y.data);
    const NormBackward without = norm_backward(kind, dy, x, {}, f.mean, f.rstd);
    const NormBackward with = norm_backward(kind, dy, x, ones, f.mean, f.rstd);
    EXPECT_EQ(without.dx.data, with.dx.data);
    EXPECT_EQ(without.dweight, with.dweight);
  }
}

TEST_F(ReferenceNorm, AddNormIsTheSumThenTheNorm) {
  const Matrix x = random_matrix(4, 21), residual = random_matrix(4, 21);
  const std::vector<double> weight = random_vector(21), bias = random_vector(21);
  for (NormKind kind : kKinds) {
    SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind));
    const AddNormForward f = add_norm_forward(kind, x, residual, weight, bias, kEps);
    Matrix h = x;
    for (std::size_t e = 0; e < h.data.size(); ++e) h.data[e] = x.data[e] + residual.data[e];
    EXPECT_EQ(f.residual.data, h.data);
    const NormForward expected = norm_forward(kind, h, weight, bias, kEps);
    EXPECT_EQ(f.norm.y.data, expected.y.data);
    EXPECT_EQ(f.norm.mean, expected.mean);
    EXPECT_EQ(f.norm.rstd, expected.rstd);
  }
}

TEST_F(ReferenceNorm, RejectsMismatchedShapes) {
  const Matrix x = random_matrix(2, 5);
  EXPECT_THROW(norm_forward(NormKind::LayerNorm, x, random_vector(4), {}, kEps),
               std::invalid_argument);
  EXPECT_THROW(add_norm_forward(NormKind::RmsNorm, x, random_matrix(2, 4), {}, {}, kEps),
               std::invalid_argument);
  const NormForward f = norm_forward(NormKind::LayerNorm, x, {}, {}, kEps);
  EXPECT_THROW(norm_backward(NormKind::LayerNorm, random_matrix(3, 5), x, {}, f.mean, f.rstd),
               std::invalid_argument);
}

}  // namespace
}  // namespace fusekit::reference
