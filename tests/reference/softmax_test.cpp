// The softmax reference: rows are distributions, invariant to shifts, the bottom-right causal
// mask, −∞ inputs and fully masked rows, extreme magnitudes, and backward against central
// differences of the forward.
#include "fusekit/reference/softmax.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numbers>
#include <random>
#include <string>

#include "reference/random_inputs.hpp"

namespace fusekit::reference {
namespace {

class ReferenceSoftmax : public RandomInputsTest {};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTolerance = 1e-12;

double row_sum(const Matrix& m, std::int64_t r) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < m.cols; ++j) sum += m(r, j);
  return sum;
}

void expect_near(const Matrix& actual, const Matrix& expected, double tolerance) {
  ASSERT_EQ(actual.rows, expected.rows);
  ASSERT_EQ(actual.cols, expected.cols);
  for (std::int64_t i = 0; i < actual.rows; ++i)
    for (std::int64_t j = 0; j < actual.cols; ++j)
      ASSERT_NEAR(actual(i, j), expected(i, j), tolerance) << "at (" << i << ", " << j << ")";
}

TEST_F(ReferenceSoftmax, RowsAreDistributionsInvariantToShifts) {
  const Matrix x = random_matrix(6, 37, 10.0);
  const Matrix y = softmax_forward(x);
  Matrix shifted = x;
  for (std::int64_t i = 0; i < x.rows; ++i) {
    EXPECT_NEAR(row_sum(y, i), 1.0, kTolerance);
    const double shift = 100.0 * uniform_(rng_);
    for (std::int64_t j = 0; j < x.cols; ++j) {
      EXPECT_GT(y(i, j), 0.0);
      EXPECT_LT(y(i, j), 1.0);
      shifted(i, j) += shift;
    }
  }
  expect_near(softmax_forward(shifted), y, kTolerance);
  // Ratios are exp of differences.
  EXPECT_NEAR(y(0, 1) / y(0, 0), std::exp(x(0, 1) - x(0, 0)), kTolerance * y(0, 1) / y(0, 0));
}

TEST_F(ReferenceSoftmax, ScaleMultipliesTheInput) {
  const Matrix x = random_matrix(4, 19, 5.0);
  const double scale = 0.125 + std::abs(uniform_(rng_));
  Matrix prescaled = x;
  for (double& v : prescaled.data) v *= scale;
  expect_near(softmax_forward(x, scale), softmax_forward(prescaled), kTolerance);
}

TEST_F(ReferenceSoftmax, CausalMaskIsAlignedBottomRight) {
  struct Shape {
    std::int64_t rows, cols;
  };
  for (Shape s : {Shape{5, 5}, Shape{3, 8}, Shape{8, 3}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols);
    const Matrix x = random_matrix(s.rows, s.cols, 4.0);
    const Matrix y = softmax_forward(x, 1.0, Causal::Yes);
    for (std::int64_t i = 0; i < s.rows; ++i) {
      // Row i sees columns 0 .. i + cols − rows: the last row sees them all.
      const std::int64_t visible = std::clamp<std::int64_t>(i + s.cols - s.rows + 1, 0, s.cols);
      if (i == s.rows - 1) {
        EXPECT_EQ(visible, s.cols);
      }
      Matrix prefix(1, visible);
      for (std::int64_t j = 0; j < visible; ++j) prefix(0, j) = x(i, j);
      const Matrix expected = softmax_forward(prefix);
      for (std::int64_t j = 0; j < s.cols; ++j) {
        EXPECT_EQ(causal_visible(i, j, s.rows, s.cols), j < visible);
        if (j < visible) {
          EXPECT_NEAR(y(i, j), expected(0, j), kTolerance);
        } else {
          EXPECT_EQ(y(i, j), 0.0) << "masked (" << i << ", " << j << ")";
        }
      }
      // A row with nothing visible is all zeros, not NaN.
      EXPECT_NEAR(row_sum(y, i), visible > 0 ? 1.0 : 0.0, kTolerance);
    }
  }
}

TEST_F(ReferenceSoftmax, MinusInfinityEntriesAndFullyMaskedRows) {
  Matrix x(3, 4);
  x.data = {-kInf, -kInf, -kInf, -kInf,  //
            -kInf, 0.0,   -kInf, 0.0,    //
            2.0,   -kInf, 2.0,   2.0};
  for (double scale : {1.0, 0.0}) {
    SCOPED_TRACE(::testing::Message() << "scale " << scale);
    const Matrix y = softmax_forward(x, scale);
    const std::vector<double> expected = {0, 0, 0, 0, 0, 0.5, 0, 0.5, 1. / 3, 0, 1. / 3, 1. / 3};
    for (std::size_t e = 0; e < expected.size(); ++e)
      EXPECT_NEAR(y.data[e], expected[e], kTolerance);
    const Matrix dx = softmax_backward(random_matrix(3, 4), y, scale);
    for (double v : dx.data) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST_F(ReferenceSoftmax, HugeAndTinyMagnitudesStayExact) {
  // softmax([a, a + ln 2]) = [1/3, 2/3] wherever exp(a) itself would overflow or underflow.
  for (double a : {-1e4, 1e4, -1e7, 1e7}) {
    SCOPED_TRACE(::testing::Message() << "a " << a);
    Matrix x(1, 2);
    x.data = {a, a + std::numbers::ln2};
    const Matrix y = softmax_forward(x);
    // NOTE: a + ln 2 is rounded to the spacing of doubles near a, about 2e-9 at 1e7.
    constexpr double kRoundedShiftTolerance = 1e-9;
    EXPECT_NEAR(y(0, 0), 1.0 / 3, kRoundedShiftTolerance);
    EXPECT_NEAR(y(0, 1), 2.0 / 3, kRoundedShiftTolerance);
  }
  Matrix extremes(2, 3);
  extremes.data = {1e308, -1e308, 0.0, 1e-300, -1e-300, 0.0};
  const Matrix y = softmax_forward(extremes);
  EXPECT_EQ(y.data, (std::vector<double>{1, 0, 0, 1. / 3, 1. / 3, 1. / 3}));
  // A huge scale on a tiny input is the same as its product.
  Matrix tiny(1, 2);
  tiny.data = {1e-300, 0.0};
  EXPECT_NEAR(softmax_forward(tiny, 1e300)(0, 0), std::exp(1.0) / (1 + std::exp(1.0)), kTolerance);
}

// L(x) = Σ G ⊙ softmax(scale·x + mask); dx against a central difference of L.
TEST_F(ReferenceSoftmax, BackwardMatchesCentralDifferences) {
  constexpr double kStep = 1e-6, kFdTolerance = 1e-8;
  for (Causal causal : {Causal::No, Causal::Yes}) {
    SCOPED_TRACE(::testing::Message() << "causal " << static_cast<int>(causal));
    Matrix x = random_matrix(4, 7, 3.0);
    const Matrix g = random_matrix(4, 7);
    const double scale = 0.5 + std::abs(uniform_(rng_));
    const auto loss = [&] {
      const Matrix y = softmax_forward(x, scale, causal);
      double l = 0.0;
      for (std::size_t e = 0; e < y.data.size(); ++e) l += g.data[e] * y.data[e];
      return l;
    };
    const Matrix dx = softmax_backward(g, softmax_forward(x, scale, causal), scale);
    for (std::size_t e = 0; e < x.data.size(); ++e) {
      const double saved = x.data[e];
      x.data[e] = saved + kStep;
      const double up = loss();
      x.data[e] = saved - kStep;
      const double down = loss();
      x.data[e] = saved;
      EXPECT_NEAR(dx.data[e], (up - down) / (2 * kStep), kFdTolerance) << "element " << e;
    }
  }
}

TEST_F(ReferenceSoftmax, BackwardRejectsMismatchedShapes) {
  EXPECT_THROW(softmax_backward(Matrix(2, 3), Matrix(3, 2)), std::invalid_argument);
}

}  // namespace
}  // namespace fusekit::reference
