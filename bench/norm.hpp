#pragma once
// The row-op ladders (memory-bound: only bytes matter):
//   rmsnorm     y = x·rstd·w                       rstd = 1/sqrt(mean(x²) + eps)
//   layernorm   y = (x − mean)·rstd·w + b
//   add_rmsnorm h = x + r;  y = rmsnorm(h)·w      (writes h and y)
//   softmax     y = exp(x − max x) / Σ exp(x − max x)
//   bias_gelu_residual  y = gelu(x + b) + r         (the pointwise chain, fusekit/pointwise_chain.hpp)
// Rungs: unfused (one eager kernel per op: statistics, normalize, affine — fusekit/eager_rows.hpp)
// and fused (fusekit/norm.hpp, fusekit/softmax.hpp); the norms also fused_fp8 (the norm with y
// quantized to e4m3, a scale per row: fusekit/norm_quantize.hpp). min_bytes: each input read
// once, each output written once; flops ≈ elements.
#include <cstdint>
#include <vector>

#include "bench/harness.hpp"
#include "bench/linear.hpp"
#include "fusekit/dtype.hpp"
#include "fusekit/model/traffic.hpp"

namespace fusekit::bench {

// The row ops are the traffic model's (one list of names for bench, explain and verify).
using model::RowOp;
using model::row_op_name;

struct RowOpOptions {
  RowOp op = RowOp::RmsNorm;
  std::int64_t rows = 32768, cols = 4096;
  DType dtype = DType::BF16;
  CheckScope scope = CheckScope::SampledRows;
  std::uint64_t seed = 0;  // 0: draw a fresh seed
};

// Row lengths 512 … 262144 (powers of two), each with rows = kSweepElements / length.
inline constexpr std::int64_t kSweepElements = std::int64_t{1} << 27;  // ~128 M elements
std::vector<std::int64_t> sweep_row_lengths();

LadderRun make_row_op_ladder(const RowOpOptions& options);

}  // namespace fusekit::bench
