// fusekit bench rmsnorm|layernorm|add_rmsnorm|softmax|bias_gelu_residual: the fused row ops
// against their eager one-kernel-per-op chains, at one shape or over the row-length sweep.
#include "bench/norm.hpp"
#include "tools/fusekit/commands.hpp"
#include "tools/fusekit/row_bench.hpp"

namespace fusekit::tools {

namespace {
// m×n tensors each op reads or writes once.
int tensors_moved(bench::RowOp op) {
  switch (op) {
    case bench::RowOp::AddRmsNorm: return 4;         // x, r in; h, y out
    case bench::RowOp::BiasGeluResidual: return 3;   // x, r in; y out
    default: return 2;                               // x in; y out
  }
}

void add_row_op(CLI::App& bench, Commands& commands, bench::RowOp op, const std::string& help) {
  add_row_bench(bench, commands, std::string(bench::row_op_name(op)), help, tensors_moved(op),
                [op](std::int64_t m, std::int64_t n, DType dtype, bench::CheckScope scope, std::uint64_t seed) {
                  return bench::make_row_op_ladder({op, m, n, dtype, scope, seed});
                });
}
}  // namespace

void add_bench_norm_commands(CLI::App& bench, Commands& commands) {
  add_row_op(bench, commands, bench::RowOp::RmsNorm, "y = rmsnorm(x)·w: eager chain vs fused");
  add_row_op(bench, commands, bench::RowOp::LayerNorm, "y = layernorm(x)·w + b: eager chain vs fused");
  add_row_op(bench, commands, bench::RowOp::AddRmsNorm, "h = x + r; y = rmsnorm(h)·w: eager chain vs fused");
  add_row_op(bench, commands, bench::RowOp::Softmax, "y = softmax(x): eager chain vs fused");
  add_row_op(bench, commands, bench::RowOp::BiasGeluResidual,
             "y = gelu(x + b) + r: eager chain vs the pointwise chain kernel");
}

}  // namespace fusekit::tools
