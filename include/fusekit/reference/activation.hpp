#pragma once
// CPU reference activations and their derivatives, in double precision.
// NOTE: header-only so the GEMM and pointwise references can inline them in their loops.
#include <cmath>
#include <numbers>

namespace fusekit::reference {

// sqrt(2/pi), the slope of the tanh approximation of GELU at the origin.
inline constexpr double kGeluTanhSlope = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
// The cubic coefficient of the tanh approximation of GELU (Hendrycks & Gimpel).
inline constexpr double kGeluTanhCubic = 0.044715;
// 1/sqrt(2*pi), the peak of the standard normal density.
inline constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;

// relu(x) = max(x, 0)
inline double relu(double x) { return x > 0.0 ? x : 0.0; }

// gelu_tanh(x) = 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))
inline double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluTanhSlope * (x + kGeluTanhCubic * x * x * x)));
}

// gelu_tanh'(x) = 0.5·(1 + t) + 0.5·x·(1 − t²)·u'(x),  t = tanh(u(x)),
// u(x) = sqrt(2/pi)·(x + 0.044715·x³)
inline double gelu_tanh_grad(double x) {
  const double t = std::tanh(kGeluTanhSlope * (x + kGeluTanhCubic * x * x * x));
  const double du = kGeluTanhSlope * (1.0 + 3.0 * kGeluTanhCubic * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}

// gelu_erf(x) = x·Φ(x) = 0.5·x·(1 + erf(x/√2))
inline double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }

// gelu_erf'(x) = Φ(x) + x·φ(x)
inline double gelu_erf_grad(double x) {
  const double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
  return cdf + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

// silu(x) = x·σ(x) = x / (1 + e^−x)
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// silu'(x) = σ(x)·(1 + x·(1 − σ(x)))
inline double silu_grad(double x) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

}  // namespace fusekit::reference
