// The reference activations: known values, the tanh/erf GELU agreement, derivatives against
// central differences, and finite results far out in the tails.
#include "fusekit/reference/activation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "reference/random_inputs.hpp"

namespace fusekit::reference {
namespace {

class ReferenceActivation : public RandomInputsTest {};

using Fn = double (*)(double);

// (f(x + h) − f(x − h)) / 2h: error O(h²·f''') + O(ε/h), about 1e-10 at this step.
constexpr double kStep = 1e-5;
constexpr double kDerivativeTolerance = 1e-8;
double central_difference(Fn f, double x) { return (f(x + kStep) - f(x - kStep)) / (2 * kStep); }

TEST_F(ReferenceActivation, KnownValues) {
  EXPECT_EQ(relu(-3.0), 0.0);
  EXPECT_EQ(relu(2.5), 2.5);
  EXPECT_EQ(gelu_tanh(0.0), 0.0);
  EXPECT_EQ(gelu_erf(0.0), 0.0);
  // Φ(1) and its tanh approximation, and the negative lobe at −2.
  EXPECT_DOUBLE_EQ(gelu_erf(1.0), 0.8413447460685429);
  EXPECT_DOUBLE_EQ(gelu_tanh(1.0), 0.8411919906082768);
  EXPECT_DOUBLE_EQ(gelu_erf(-2.0), -0.04550026389635842);
  EXPECT_DOUBLE_EQ(gelu_tanh(-2.0), -0.04540230591222494);
  EXPECT_DOUBLE_EQ(gelu_erf_grad(0.0), 0.5);
  EXPECT_DOUBLE_EQ(gelu_tanh_grad(0.0), 0.5);
  EXPECT_DOUBLE_EQ(silu(1.0), 0.7310585786300049);
  EXPECT_DOUBLE_EQ(silu(2.0), 1.7615941559557646);
  EXPECT_DOUBLE_EQ(silu_grad(0.0), 0.5);
}

TEST_F(ReferenceActivation, TanhGeluApproximatesErfGelu) {
  // NOTE: the tanh form is known to stay within 5e-4 of the exact GELU everywhere.
  constexpr double kMaxGap = 5e-4;
  std::uniform_real_distribution<double> x(-10.0, 10.0);
  for (int trial = 0; trial < 10000; ++trial) {
    const double v = x(rng_);
    ASSERT_NEAR(gelu_tanh(v), gelu_erf(v), kMaxGap) << "x = " << v;
  }
}

TEST_F(ReferenceActivation, DerivativesMatchCentralDifferences) {
  struct Pair {
    const char* name;
    Fn f, grad;
  };
  const Pair pairs[] = {{"gelu_tanh", gelu_tanh, gelu_tanh_grad},
                        {"gelu_erf", gelu_erf, gelu_erf_grad},
                        {"silu", silu, silu_grad}};
  std::uniform_real_distribution<double> x(-8.0, 8.0);
  for (const auto& pair : pairs) {
    SCOPED_TRACE(pair.name);
    for (int trial = 0; trial < 2000; ++trial) {
      const double v = x(rng_);
      ASSERT_NEAR(pair.grad(v), central_difference(pair.f, v), kDerivativeTolerance) << "x = " << v;
    }
  }
}

TEST_F(ReferenceActivation, TailsAreFiniteAndAsymptotic) {
  // NOTE: inputs come from fp32/bf16 tensors, so the float range is what must stay finite.
  const double big = std::numeric_limits<float>::max();
  for (double v : {big, -big, 1e4, -1e4}) {
    SCOPED_TRACE(v);
    for (Fn f : {gelu_tanh, gelu_erf, silu, gelu_tanh_grad, gelu_erf_grad, silu_grad})
      EXPECT_TRUE(std::isfinite(f(v)));
    const double expect = v > 0 ? v : 0.0;
    const double expect_grad = v > 0 ? 1.0 : 0.0;
    EXPECT_EQ(gelu_tanh(v), expect);
    EXPECT_EQ(gelu_erf(v), expect);
    EXPECT_EQ(silu(v), expect);
    EXPECT_EQ(gelu_tanh_grad(v), expect_grad);
    EXPECT_EQ(gelu_erf_grad(v), expect_grad);
    EXPECT_EQ(silu_grad(v), expect_grad);
  }
}

}  // namespace
}  // namespace fusekit::reference
