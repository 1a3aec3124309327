#pragma once
// The run-time parameters of the Hopper kernel's scale-bias-activation epilogue
// (sm90_cutlass_kernel.cuh), which src/gemm fills from an EpilogueSpec:
//   y = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi)  [+ R[i,j]]   [D = e4m3(y·s), amax = max |y|]
// One compiled kernel per dtype (and with or without R) serves every such chain: r, c and b are
// optional tensors (absent: 1, 1 and 0), α, the activation and the bounds are kernel arguments.
#include <cstdint>
#include <limits>

namespace fusekit::device::sm90 {

// The activation of the scale-bias-activation epilogue.
enum class Activation : std::uint8_t { Identity, Relu, GeluTanh, GeluErf, Silu };

struct ScaleBiasActParams {
  float alpha = 1.0f;
  bool scaled = false;  // α ≠ 1, r or c in the chain: without, the kernel skips their two multiplies
  Activation activation = Activation::Identity;
  float lo = -std::numeric_limits<float>::infinity();  // the clamp's bounds (none: ±∞, skipped)
  float hi = std::numeric_limits<float>::infinity();
};

}  // namespace fusekit::device::sm90
