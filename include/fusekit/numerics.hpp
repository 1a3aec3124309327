#pragma once
// Device-side helpers for honest tests and benchmarks: fresh random data, poisoned outputs,
// and comparisons that never let NaN pass.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fusekit/tensor.hpp"

namespace fusekit {

// t[i] = lo + (hi - lo) · u, u uniform in [0, 1) from a counter-based hash of (seed, i);
// rounded to t's dtype. Deterministic for a seed, so a failing seed reproduces.
void fill_uniform(const TensorView& t, std::uint64_t seed, float lo, float hi, cudaStream_t stream = nullptr);

// Every byte of every element set to 0xFF: NaN in f32, f16, bf16, e4m3 and e5m2, so an element
// a kernel fails to write cannot pass a comparison.
void poison(const TensorView& t, cudaStream_t stream = nullptr);

struct Comparison {
  double rel_l2 = 0;           // ‖actual − expected‖₂ / ‖expected‖₂ (NaN-free inputs only)
  double max_abs = 0;          // max |actual − expected|
  std::int64_t nonfinite = 0;  // elements of `actual` that are NaN or ±Inf
  bool passes(double bound) const { return nonfinite == 0 && rel_l2 <= bound; }
};

// Compares two tensors of the same shape on the device, accumulating in double.
Comparison compare(const TensorView& actual, const TensorView& expected, cudaStream_t stream = nullptr);

// Elements of `t` that are NaN or ±Inf.
std::int64_t count_nonfinite(const TensorView& t, cudaStream_t stream = nullptr);

}  // namespace fusekit
