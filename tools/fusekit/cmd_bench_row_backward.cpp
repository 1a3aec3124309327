// fusekit bench rmsnorm_bwd|layernorm_bwd|softmax_bwd: the fused row backward kernels, at one
// shape or over the row-length sweep (512 … 262144 at ~128 M elements, where the op holds the row).
#include "bench/row_backward.hpp"
#include "tools/fusekit/commands.hpp"
#include "tools/fusekit/row_bench.hpp"

namespace fusekit::tools {

namespace {
void add_row_backward_op(CLI::App& bench, Commands& commands, bench::RowBackwardOp op, const std::string& help) {
  constexpr int kTensors = 3;  // x (or y) and dy in; dx out
  add_row_bench(bench, commands, std::string(bench::row_backward_op_name(op)), help, kTensors,
                [op](std::int64_t m, std::int64_t n, DType dtype, bench::CheckScope scope, std::uint64_t seed) {
                  return bench::make_row_backward_ladder({op, m, n, dtype, scope, seed});
                });
}
}  // namespace

void add_bench_row_backward_commands(CLI::App& bench, Commands& commands) {
  add_row_backward_op(bench, commands, bench::RowBackwardOp::RmsNorm, "dx, dw of y = rmsnorm(x)·w: fused");
  add_row_backward_op(bench, commands, bench::RowBackwardOp::LayerNorm, "dx, dw, db of y = layernorm(x)·w + b: fused");
  add_row_backward_op(bench, commands, bench::RowBackwardOp::Softmax, "dx of y = softmax(x): fused");
}

}  // namespace fusekit::tools
