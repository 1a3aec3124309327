// The GEMM reference: a hand-computed case, every epilogue against a naive triple loop with both
// transposes, row sampling, the ReLU bit-mask layout, and the bias gradients against finite
// differences of the forward epilogues they differentiate.
#include "fusekit/reference/gemm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>

#include "fusekit/reference/activation.hpp"

#include "reference/random_inputs.hpp"

namespace fusekit::reference {
namespace {

class ReferenceGemm : public RandomInputsTest {
 protected:
  // Half the problems skip C, as fusekit::gemm does when beta == 0.
  double random_beta() { return std::bernoulli_distribution(0.5)(rng_) ? 0.0 : uniform_(rng_); }
  // An odd size in [1, max].
  std::int64_t odd_size(std::int64_t max) {
    return 2 * std::uniform_int_distribution<std::int64_t>(0, (max - 1) / 2)(rng_) + 1;
  }
};

constexpr Transpose kTransposes[] = {Transpose::No, Transpose::Yes};
constexpr std::int64_t kBitsPerByte = 8;
// cuBLASLt pads every ReLU mask row to a multiple of 128 bits.
constexpr std::int64_t kMaskRowBits = 128;
std::int64_t mask_row_bytes(std::int64_t n) {
  return (n + kMaskRowBits - 1) / kMaskRowBits * (kMaskRowBits / kBitsPerByte);
}
bool mask_bit(const std::vector<std::uint8_t>& mask, std::int64_t row_bytes, std::int64_t i,
              std::int64_t j) {
  return (mask[i * row_bytes + j / kBitsPerByte] >> (j % kBitsPerByte)) & 1;
}
// Relative tolerance between two double computations of the same sums in different orders.
constexpr double kTolerance = 1e-12;

Matrix transposed(const Matrix& m) {
  Matrix t(m.cols, m.rows);
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t j = 0; j < m.cols; ++j) t(j, i) = m(i, j);
  return t;
}

// Stores `op` (the logical operand) as fusekit::gemm would receive it under `trans`.
Matrix stored(const Matrix& op, Transpose trans) {
  return trans == Transpose::Yes ? transposed(op) : op;
}

// NOTE: GemmProblem's vector and matrix members have no default member initializers, so a
// designated initializer that skips them trips -Wmissing-field-initializers; build it by hand.
GemmProblem problem(Matrix a, Transpose ta, Matrix b, Transpose tb, Epilogue epilogue) {
  GemmProblem p;
  p.a = std::move(a);
  p.b = std::move(b);
  p.trans_a = ta;
  p.trans_b = tb;
  p.epilogue = epilogue;
  return p;
}

// Σ G ⊙ Y: the scalar loss whose gradient the backward epilogues compute.
double weighted_sum(const Matrix& g, const Matrix& y) {
  double l = 0.0;
  for (std::size_t e = 0; e < y.data.size(); ++e) l += g.data[e] * y.data[e];
  return l;
}

// dL/dv[j] by a central difference of `loss` over v[j] ± step, v[j] restored.
template <class Loss>
double central_difference(std::vector<double>& v, std::int64_t j, double step, const Loss& loss) {
  const double saved = v[j];
  v[j] = saved + step;
  const double up = loss();
  v[j] = saved - step;
  const double down = loss();
  v[j] = saved;
  return (up - down) / (2 * step);
}

bool is_relu_mask_output(Epilogue e) {
  return e == Epilogue::ReluAux || e == Epilogue::ReluAuxBias;
}
bool is_preact_output(Epilogue e) { return e == Epilogue::GeluAux || e == Epilogue::GeluAuxBias; }
bool reads_bias(Epilogue e) {
  return e == Epilogue::Bias || e == Epilogue::ReluBias || e == Epilogue::ReluAuxBias ||
         e == Epilogue::GeluBias || e == Epilogue::GeluAuxBias;
}

struct Expected {
  Matrix d, preact;
  std::vector<std::uint8_t> mask;
  std::vector<double> bias_grad;
  double amax = 0.0;
};

// The semantics of fusekit/gemm.hpp, written out element by element.
Expected naive_gemm(const GemmProblem& p, Matrix op_a, Matrix op_b) {
  const std::int64_t m = op_a.rows, n = op_b.cols, k = op_a.cols;
  const std::int64_t row_bytes = mask_row_bytes(n);
  Expected e{Matrix(m, n), Matrix(m, n), std::vector<std::uint8_t>(m * row_bytes, 0), {}, 0.0};
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::int64_t l = 0; l < k; ++l) sum += op_a(i, l) * op_b(l, j);
      double acc = p.scale_ab * p.alpha * sum + (p.beta != 0.0 ? p.beta * p.c(i, j) : 0.0);
      const double biased = reads_bias(p.epilogue) ? acc + p.bias[j] : acc;
      double d = acc;
      switch (p.epilogue) {
        case Epilogue::Default:
        case Epilogue::BGradA:
        case Epilogue::BGradB: d = acc; break;
        case Epilogue::Bias: d = biased; break;
        case Epilogue::Relu:
        case Epilogue::ReluAux:
        case Epilogue::ReluBias:
        case Epilogue::ReluAuxBias: d = std::max(biased, 0.0); break;
        case Epilogue::Gelu:
        case Epilogue::GeluAux:
        case Epilogue::GeluBias:
        case Epilogue::GeluAuxBias: d = gelu_tanh(biased); break;
        case Epilogue::DRelu:
        case Epilogue::DReluBGrad: d = mask_bit(p.relu_mask_in, row_bytes, i, j) ? acc : 0.0; break;
        case Epilogue::DGelu:
        case Epilogue::DGeluBGrad: d = acc * gelu_tanh_grad(p.preact_in(i, j)); break;
      }
      e.d(i, j) = d;
      e.preact(i, j) = biased;
      if (biased > 0.0)
        e.mask[i * row_bytes + j / kBitsPerByte] |=
            static_cast<std::uint8_t>(1 << (j % kBitsPerByte));
      e.amax = std::max(e.amax, std::abs(d));
    }
  }
  if (p.epilogue == Epilogue::BGradA) {
    e.bias_grad.assign(m, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t l = 0; l < k; ++l) e.bias_grad[i] += op_a(i, l);
  } else if (p.epilogue == Epilogue::BGradB) {
    e.bias_grad.assign(n, 0.0);
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t j = 0; j < n; ++j) e.bias_grad[j] += op_b(l, j);
  } else if (p.epilogue == Epilogue::DReluBGrad || p.epilogue == Epilogue::DGeluBGrad) {
    e.bias_grad.assign(n, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) e.bias_grad[j] += e.d(i, j);
  }
  return e;
}

void expect_near(const Matrix& actual, const Matrix& expected) {
  ASSERT_EQ(actual.rows, expected.rows);
  ASSERT_EQ(actual.cols, expected.cols);
  for (std::int64_t i = 0; i < actual.rows; ++i)
    for (std::int64_t j = 0; j < actual.cols; ++j)
      ASSERT_NEAR(actual(i, j), expected(i, j), kTolerance * (1.0 + std::abs(expected(i, j))))
          << "at (" << i << ", " << j << ")";
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], kTolerance * (1.0 + std::abs(expected[i]))) << "at " << i;
}

TEST_F(ReferenceGemm, HandComputedTwoByThreeByFour) {
  // op(A) [2,3] · op(B) [3,4] = [[4, 5, 3, 3], [10, 11, 6, 9]]
  Matrix a(2, 3), b(3, 4), c(2, 4, 0.0);
  a.data = {1, 2, 3, 4, 5, 6};
  b.data = {1, 0, -1, 2, 0, 1, 2, -1, 1, 1, 0, 1};
  c.data = {1, 1, 1, 1, 0, 0, 0, 0};
  for (Transpose ta : kTransposes) {
    for (Transpose tb : kTransposes) {
      GemmProblem p = problem(stored(a, ta), ta, stored(b, tb), tb, Epilogue::Default);
      p.c = c;
      p.alpha = 2.0;
      p.beta = -1.0;
      // 2·AB − C
      EXPECT_EQ(gemm(p).d.data, (std::vector<double>{7, 9, 5, 5, 20, 22, 12, 18}));

      p.epilogue = Epilogue::ReluAuxBias;
      p.bias = {-8, 0, -6, 1};
      const GemmResult r = gemm(p);
      // relu(2·AB − C + bias) with pre-activation [[-1, 9, -1, 6], [12, 22, 6, 19]]
      EXPECT_EQ(r.d.data, (std::vector<double>{0, 9, 0, 6, 12, 22, 6, 19}));
      EXPECT_EQ(r.amax, 22.0);
      ASSERT_EQ(r.mask_row_bytes, 16);
      ASSERT_EQ(r.relu_mask.size(), 32u);
      EXPECT_EQ(r.relu_mask[0], 0b1010);  // columns 1 and 3 of row 0
      EXPECT_EQ(r.relu_mask[16], 0b1111);

      p.epilogue = Epilogue::BGradA;
      EXPECT_EQ(gemm(p).bias_grad, (std::vector<double>{6, 15}));  // row sums of op(A)
      p.epilogue = Epilogue::BGradB;
      EXPECT_EQ(gemm(p).bias_grad, (std::vector<double>{2, 2, 1, 2}));  // column sums of op(B)
    }
  }
}

TEST_F(ReferenceGemm, EveryEpilogueMatchesNaiveTripleLoop) {
  for (Epilogue epilogue : kAllEpilogues) {
    for (Transpose ta : kTransposes) {
      for (Transpose tb : kTransposes) {
        const std::int64_t m = odd_size(41), n = odd_size(41), k = odd_size(41);
        SCOPED_TRACE(::testing::Message()
                     << "epilogue " << static_cast<int>(epilogue) << " ta " << static_cast<int>(ta)
                     << " tb " << static_cast<int>(tb) << " M,N,K " << m << "," << n << "," << k);
        const Matrix op_a = random_matrix(m, k), op_b = random_matrix(k, n);
        const std::int64_t row_bytes = mask_row_bytes(n);
        GemmProblem p = problem(stored(op_a, ta), ta, stored(op_b, tb), tb, epilogue);
        p.c = random_matrix(m, n);
        p.alpha = 1.0 + uniform_(rng_);
        p.beta = random_beta();
        p.scale_ab = 1.0 + uniform_(rng_);
        p.bias = random_vector(n);
        p.preact_in = random_matrix(m, n);
        p.mask_row_bytes = row_bytes;
        std::uniform_int_distribution<int> byte(0, 255);
        for (std::int64_t i = 0; i < m * row_bytes; ++i)
          p.relu_mask_in.push_back(static_cast<std::uint8_t>(byte(rng_)));

        const GemmResult r = gemm(p);
        const Expected e = naive_gemm(p, op_a, op_b);
        expect_near(r.d, e.d);
        EXPECT_NEAR(r.amax, e.amax, kTolerance * (1.0 + e.amax));
        expect_near(r.bias_grad, e.bias_grad);
        if (is_preact_output(epilogue)) {
          expect_near(r.preact, e.preact);
        } else {
          EXPECT_TRUE(r.preact.empty());
        }
        if (is_relu_mask_output(epilogue)) {
          EXPECT_EQ(r.mask_row_bytes, row_bytes);
          EXPECT_EQ(r.relu_mask, e.mask);
        } else {
          EXPECT_TRUE(r.relu_mask.empty());
        }
      }
    }
  }
}

TEST_F(ReferenceGemm, GemmRowsMatchesTheFullResult) {
  const std::int64_t m = odd_size(61), n = odd_size(61), k = odd_size(61);
  std::uniform_int_distribution<std::int64_t> row(0, m - 1);
  std::vector<std::int64_t> rows;  // unsorted, possibly repeated
  for (int r = 0; r < 7; ++r) rows.push_back(row(rng_));
  constexpr std::uint8_t kHalfTheBits = 0b01011010;
  for (Epilogue epilogue : kAllEpilogues) {
    SCOPED_TRACE(::testing::Message() << "epilogue " << static_cast<int>(epilogue));
    GemmProblem p =
        problem(random_matrix(k, m), Transpose::Yes, random_matrix(k, n), Transpose::No, epilogue);
    p.c = random_matrix(m, n);
    p.beta = 0.5;
    p.bias = random_vector(n);
    p.preact_in = random_matrix(m, n);
    p.relu_mask_in.assign(m * mask_row_bytes(n), kHalfTheBits);
    const GemmResult full = gemm(p);
    const GemmResult some = gemm_rows(p, rows);
    ASSERT_EQ(some.d.rows, std::ssize(rows));
    double amax = 0.0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      for (std::int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(some.d(r, j), full.d(rows[r], j));
        amax = std::max(amax, std::abs(full.d(rows[r], j)));
        if (is_preact_output(epilogue)) {
          EXPECT_EQ(some.preact(r, j), full.preact(rows[r], j));
        }
        if (is_relu_mask_output(epilogue)) {
          EXPECT_EQ(relu_mask_bit(some.relu_mask, some.mask_row_bytes, r, j),
                    relu_mask_bit(full.relu_mask, full.mask_row_bytes, rows[r], j));
        }
      }
    }
    EXPECT_EQ(some.amax, amax);
    if (epilogue == Epilogue::BGradA) {
      ASSERT_EQ(some.bias_grad.size(), rows.size());
      for (std::size_t r = 0; r < rows.size(); ++r)
        EXPECT_EQ(some.bias_grad[r], full.bias_grad[rows[r]]);
    } else if (epilogue == Epilogue::BGradB) {
      EXPECT_EQ(some.bias_grad, full.bias_grad);
    } else {
      // NOTE: the column sums of DRELU_BGRAD / DGELU_BGRAD need every row.
      EXPECT_TRUE(some.bias_grad.empty());
    }
  }
}

TEST_F(ReferenceGemm, ReluMaskLayout) {
  struct Case {
    std::int64_t n, row_bytes_given, row_bytes;
  };
  // Rows are padded to 128 bits unless the caller gives a (larger) row pitch.
  for (Case c : {Case{1, 0, 16}, Case{128, 0, 16}, Case{129, 0, 32}, Case{37, 48, 48}}) {
    SCOPED_TRACE(::testing::Message() << "N " << c.n << " row bytes given " << c.row_bytes_given);
    const std::int64_t m = 3, k = 5;
    GemmProblem p = problem(random_matrix(m, k), Transpose::No, random_matrix(k, c.n),
                            Transpose::No, Epilogue::ReluAux);
    p.mask_row_bytes = c.row_bytes_given;
    const GemmResult r = gemm(p);
    ASSERT_EQ(r.mask_row_bytes, c.row_bytes);
    ASSERT_EQ(std::ssize(r.relu_mask), m * c.row_bytes);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < c.row_bytes * kBitsPerByte; ++j) {
        const bool bit = relu_mask_bit(r.relu_mask, r.mask_row_bytes, i, j);
        // Bit j of the row is bit j % 8 (LSB first) of byte j / 8; padding bits stay clear.
        EXPECT_EQ(bit, mask_bit(r.relu_mask, c.row_bytes, i, j));
        EXPECT_EQ(bit, j < c.n && r.d(i, j) > 0.0) << "bit (" << i << ", " << j << ")";
      }
    }
  }
}

TEST_F(ReferenceGemm, DReluConsumesTheMaskOfReluAux) {
  const std::int64_t m = odd_size(33), n = odd_size(200), k = odd_size(33);
  const GemmResult f = gemm(problem(random_matrix(m, k), Transpose::No, random_matrix(k, n),
                                    Transpose::No, Epilogue::ReluAux));
  GemmProblem backward = problem(random_matrix(m, k), Transpose::No, random_matrix(k, n),
                                 Transpose::No, Epilogue::DRelu);
  backward.relu_mask_in = f.relu_mask;
  backward.mask_row_bytes = f.mask_row_bytes;
  const GemmResult g = gemm(backward);
  backward.epilogue = Epilogue::Default;
  const GemmResult plain = gemm(backward);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      EXPECT_EQ(g.d(i, j), f.d(i, j) > 0.0 ? plain.d(i, j) : 0.0)
          << "at (" << i << ", " << j << ")";
}

// A product large enough to run on several threads and span several column panels.
TEST_F(ReferenceGemm, LargeProductMatchesNaiveAtSampledEntries) {
  const std::int64_t m = 96, n = 1031, k = 401;
  const GemmProblem p = problem(random_matrix(m, k), Transpose::No, random_matrix(k, n),
                                Transpose::No, Epilogue::Gelu);
  const GemmResult r = gemm(p);
  std::uniform_int_distribution<std::int64_t> row(0, m - 1), col(0, n - 1);
  for (int sample = 0; sample < 500; ++sample) {
    const std::int64_t i = row(rng_), j = col(rng_);
    double sum = 0.0;
    for (std::int64_t l = 0; l < k; ++l) sum += p.a(i, l) * p.b(l, j);
    ASSERT_NEAR(r.d(i, j), gelu_tanh(sum), kTolerance * (1.0 + std::abs(sum)))
        << "at (" << i << ", " << j << ")";
  }
}

// L(b) = Σ G ⊙ (X·Wᵀ + b): dW = Gᵀ·X carries db as BGRADA, and dWᵀ = Xᵀ·G carries it as
// BGRADB. L is linear in b, so a central difference is exact up to rounding.
TEST_F(ReferenceGemm, BiasGradientsOfALinearLayerMatchFiniteDifferences) {
  const std::int64_t tokens = odd_size(15), in = odd_size(15), out = odd_size(15);
  const Matrix x = random_matrix(tokens, in), w = random_matrix(out, in);
  const Matrix g = random_matrix(tokens, out);
  std::vector<double> bias = random_vector(out);
  const auto loss = [&] {
    GemmProblem fwd = problem(x, Transpose::No, w, Transpose::Yes, Epilogue::Bias);
    fwd.bias = bias;
    return weighted_sum(g, gemm(fwd).d);
  };
  const GemmResult by_a = gemm(problem(g, Transpose::Yes, x, Transpose::No, Epilogue::BGradA));
  const GemmResult by_b = gemm(problem(x, Transpose::Yes, g, Transpose::No, Epilogue::BGradB));
  ASSERT_EQ(std::ssize(by_a.bias_grad), out);
  ASSERT_EQ(std::ssize(by_b.bias_grad), out);
  constexpr double kStep = 1e-3, kFdTolerance = 1e-9;
  for (std::int64_t j = 0; j < out; ++j) {
    const double fd = central_difference(bias, j, kStep, loss);
    EXPECT_NEAR(by_a.bias_grad[j], fd, kFdTolerance) << "j " << j;
    EXPECT_NEAR(by_b.bias_grad[j], fd, kFdTolerance) << "j " << j;
  }
  expect_near(by_b.d, transposed(by_a.d));
}

// L(b1) = Σ G ⊙ (act(X·W1ᵀ + b1)·W2ᵀ): with the forward's aux, D{RELU,GELU}_BGRAD of G·W2 gives
// dL/d(pre-activation) as D and dL/db1 as bias_grad.
TEST_F(ReferenceGemm, ActivationBackwardBiasGradientsMatchFiniteDifferences) {
  struct Pair {
    Epilogue forward, backward;
  };
  for (Pair pair : {Pair{Epilogue::GeluAuxBias, Epilogue::DGeluBGrad},
                    Pair{Epilogue::ReluAuxBias, Epilogue::DReluBGrad}}) {
    SCOPED_TRACE(::testing::Message() << "backward epilogue " << static_cast<int>(pair.backward));
    const std::int64_t tokens = odd_size(9), in = odd_size(9), hidden = odd_size(9), out = 5;
    const Matrix x = random_matrix(tokens, in), w1 = random_matrix(hidden, in);
    const Matrix w2 = random_matrix(out, hidden), g = random_matrix(tokens, out);
    std::vector<double> b1 = random_vector(hidden);
    const auto forward = [&] {
      GemmProblem fc1 = problem(x, Transpose::No, w1, Transpose::Yes, pair.forward);
      fc1.bias = b1;
      return gemm(fc1);
    };
    const auto loss = [&] {
      return weighted_sum(g, gemm(problem(forward().d, Transpose::No, w2, Transpose::Yes, Epilogue::Default)).d);
    };
    const GemmResult f = forward();
    GemmProblem back = problem(g, Transpose::No, w2, Transpose::No, pair.backward);
    back.preact_in = f.preact;
    back.relu_mask_in = f.relu_mask;
    back.mask_row_bytes = f.mask_row_bytes;
    const GemmResult r = gemm(back);
    ASSERT_EQ(std::ssize(r.bias_grad), hidden);
    // NOTE: a small step keeps ReLU's kink out of reach of every pre-activation but one in ~1e6.
    constexpr double kStep = 1e-6, kFdTolerance = 1e-7;
    for (std::int64_t j = 0; j < hidden; ++j)
      EXPECT_NEAR(r.bias_grad[j], central_difference(b1, j, kStep, loss), kFdTolerance) << "j " << j;
  }
}

TEST_F(ReferenceGemm, RejectsMismatchedShapes) {
  GemmProblem p = problem(random_matrix(3, 4), Transpose::No, random_matrix(5, 6), Transpose::No,
                          Epilogue::Default);
  EXPECT_THROW(gemm(p), std::invalid_argument);
  p.b = random_matrix(4, 6);
  p.epilogue = Epilogue::Bias;
  p.bias = random_vector(5);
  EXPECT_THROW(gemm(p), std::invalid_argument);
  p.bias = random_vector(6);
  const std::int64_t bad_row[] = {3};
  EXPECT_THROW(gemm_rows(p, bad_row), std::invalid_argument);
}

}  // namespace
}  // namespace fusekit::reference
