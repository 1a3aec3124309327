#pragma once
// The row backward ladders (memory-bound: only bytes matter):
//   rmsnorm_bwd    dx = rstd·(g − x̂·mean(g·x̂)),           g = dy·w, x̂ = x·rstd; dw = Σ_rows dy·x̂
//   layernorm_bwd  dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), x̂ = (x − mean)·rstd; dw, db = Σ_rows dy
//   softmax_bwd    dx = y ⊙ (dy − Σ_j dy·y)
// One rung, fused (fusekit/norm_backward.hpp, fusekit/softmax_backward.hpp). min_bytes: x (or
// y) and dy read once, dx written once, plus the per-column and per-row vectors; flops ≈
// elements. dx is checked on sampled rows against the CPU reference (the parameter gradients,
// sums over every row, are checked by the GPU tests).
#include <cstdint>
#include <string_view>

#include "bench/harness.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit::bench {

enum class RowBackwardOp : std::uint8_t { RmsNorm, LayerNorm, Softmax };

std::string_view row_backward_op_name(RowBackwardOp op);  // "rmsnorm_bwd", "layernorm_bwd", "softmax_bwd"

struct RowBackwardOptions {
  RowBackwardOp op = RowBackwardOp::RmsNorm;
  std::int64_t rows = 32768, cols = 4096;
  DType dtype = DType::BF16;
  CheckScope scope = CheckScope::SampledRows;
  std::uint64_t seed = 0;  // 0: draw a fresh seed
};

LadderRun make_row_backward_ladder(const RowBackwardOptions& options);

}  // namespace fusekit::bench
