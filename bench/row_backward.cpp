#include "bench/row_backward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/norm.hpp"
#include "fusekit/norm_backward.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/norm.hpp"
#include "fusekit/reference/softmax.hpp"
#include "fusekit/softmax.hpp"
#include "fusekit/softmax_backward.hpp"
#include "fusekit/transfer.hpp"

namespace fusekit::bench {

namespace {

constexpr float kEps = 1e-5f;

struct RowBackwardState {
  RowBackwardOptions o;
  DeviceTensor x, y, dy, dx, w, dw, db, mean, rstd, workspace;
  std::vector<std::int64_t> rows;     // checked rows
  reference::Matrix expected;         // dx of the checked rows
  std::vector<std::int64_t> columns;  // the columns whose dw and db are checked (norms)
  std::vector<double> expected_dw, expected_db;
};

std::vector<double> sampled_stats(const std::vector<double>& all, const std::vector<std::int64_t>& rows) {
  std::vector<double> v;
  for (const std::int64_t r : rows) v.push_back(all[static_cast<std::size_t>(r)]);
  return v;
}

// `out` (a vector of n) at `columns` against `expected`, folded into `c`: the worse relative L2 of
// the two, and every NaN or Inf in `out`.
void fold_columns(Check& c, const TensorView& out, const std::vector<std::int64_t>& columns,
                  const std::vector<double>& expected) {
  const auto got = download(out);
  double d = 0, r = 0;
  for (std::size_t k = 0; k < columns.size(); ++k) {
    const double v = got[static_cast<std::size_t>(columns[k])];
    if (std::isfinite(v)) d += (v - expected[k]) * (v - expected[k]);  // else counted in nonfinite
    r += expected[k] * expected[k];
  }
  c.rel_err = std::max(c.rel_err, std::sqrt(d / std::max(r, std::numeric_limits<double>::min())));
  c.nonfinite += count_nonfinite(out);
  c.passed = c.nonfinite == 0 && c.rel_err <= c.bound;
}

}  // namespace

std::string_view row_backward_op_name(RowBackwardOp op) {
  switch (op) {
    case RowBackwardOp::RmsNorm: return "rmsnorm_bwd";
    case RowBackwardOp::LayerNorm: return "layernorm_bwd";
    case RowBackwardOp::Softmax: return "softmax_bwd";
  }
  return "?";
}

LadderRun make_row_backward_ladder(const RowBackwardOptions& o) {
  const auto [m, n] = std::pair{o.rows, o.cols};
  require(m > 0 && n > 0, "shape (rows, cols)", "both positive", fmt::format("{}, {}", m, n));
  require(o.dtype == DType::BF16 || o.dtype == DType::F16 || o.dtype == DType::F32, "dtype", "bf16, f16 or f32",
          dtype_name(o.dtype));
  const std::uint64_t seed = seed_or_fresh(o.seed);

  auto s = std::make_shared<RowBackwardState>();
  s->o = o;
  const DType dt = o.dtype;
  s->x = DeviceTensor(dt, {m, n});
  s->dy = DeviceTensor(dt, {m, n});
  s->dx = DeviceTensor(dt, {m, n});
  fill_uniform(s->x, seed, -2.0f, 2.0f);
  fill_uniform(s->dy, seed + 1, -1.0f, 1.0f);
  s->rows = rows_to_check(m, o.scope, seed);
  const auto hdy = sampled_rows(s->dy, s->rows);

  LadderRun ladder;
  ladder.ladder = std::string(row_backward_op_name(o.op));
  ladder.shape = fmt::format("{}x{}", m, n);
  ladder.dtype = std::string(dtype_name(dt));
  ladder.baseline = "fused";
  const double esz = static_cast<double>(dtype_size(dt));
  const double elements = static_cast<double>(m) * static_cast<double>(n);
  const double stat_bytes = static_cast<double>(m) * sizeof(float);
  const bool norm = o.op != RowBackwardOp::Softmax;
  if (norm) s->columns = rows_to_check(n, o.scope, seed + 3);
  const std::string rows_checked = s->rows.size() == static_cast<std::size_t>(m)
                                       ? "dx of every row"
                                       : fmt::format("dx of {} sampled rows", s->rows.size());
  // LayerNorm has a bias and so db; RMSNorm dw alone.
  const char* grads = o.op == RowBackwardOp::LayerNorm ? "dw and db" : "dw";
  const std::string columns_checked =
      !norm ? ""
      : s->columns.size() == static_cast<std::size_t>(n)
          ? fmt::format(", {} of every column", grads)
          : fmt::format(", {} of {} sampled columns", grads, s->columns.size());
  const std::string what = fmt::format("{}{} vs CPU double reference (seed {})", rows_checked, columns_checked, seed);
  auto check = [s, what] {
    Check c = check_rows(s->dx, s->rows, s->expected, s->o.dtype, what);
    if (s->dw.data()) fold_columns(c, s->dw, s->columns, s->expected_dw);
    if (s->db.data()) fold_columns(c, s->db, s->columns, s->expected_db);
    return c;
  };
  auto poison_all = [s](cudaStream_t st) {
    poison(s->dx, st);
    if (s->dw.data()) poison(s->dw, st);
    if (s->db.data()) poison(s->db, st);
  };

  if (o.op == RowBackwardOp::Softmax) {
    s->y = DeviceTensor(dt, {m, n});
    softmax_forward({s->x, s->y});
    s->expected = reference::softmax_backward(hdy, sampled_rows(s->y, s->rows));
    ladder.rungs.push_back(Rung{"fused", "one kernel: y and dy rows in registers, one reduction Σ dy·y",
                                [s](cudaStream_t st) { softmax_backward({s->y, s->dy, s->dx}, st); }, poison_all,
                                check, elements, esz * 3 * elements});
    return ladder;
  }

  const NormKind kind = o.op == RowBackwardOp::RmsNorm ? NormKind::RmsNorm : NormKind::LayerNorm;
  const bool ln = kind == NormKind::LayerNorm;
  s->w = DeviceTensor(dt, {n});
  s->dw = DeviceTensor(dt, {n});
  s->rstd = DeviceTensor(DType::F32, {m});
  fill_uniform(s->w, seed + 2, 0.5f, 1.5f);
  if (ln) {
    s->db = DeviceTensor(dt, {n});
    s->mean = DeviceTensor(DType::F32, {m});
  }
  s->workspace = DeviceTensor(DType::U8, {static_cast<std::int64_t>(norm_backward_workspace_bytes(m, n, dt))});
  // The statistics the training forward saved: the fused forward's, into a scratch output.
  {
    NormForwardArgs f;
    f.kind = kind;
    f.x = s->x;
    f.y = s->dx;
    f.mean = s->mean;
    f.rstd = s->rstd;
    f.eps = kEps;
    norm_forward(f);
  }
  const std::vector<double> mean = ln ? download(s->mean) : std::vector<double>{}, rstd = download(s->rstd);
  s->expected = reference::norm_backward(kind, hdy, sampled_rows(s->x, s->rows), download(s->w),
                                         ln ? sampled_stats(mean, s->rows) : std::vector<double>{},
                                         sampled_stats(rstd, s->rows))
                    .dx;
  // dw and db of the checked columns sum over every row of those columns alone; the same
  // reference on that column block (its dx, which needs whole rows, is not used).
  auto column_grads = reference::norm_backward(kind, sampled_columns(s->dy, s->columns),
                                               sampled_columns(s->x, s->columns), {}, mean, rstd);
  s->expected_dw = std::move(column_grads.dweight);
  s->expected_db = std::move(column_grads.dbias);
  // x, dy read and dx written; w read, dw (and db) written; the saved statistics read.
  const double bytes = esz * (3 * elements + (ln ? 3 : 2) * n) + (ln ? 2 : 1) * stat_bytes;
  ladder.rungs.push_back(Rung{
      "fused",
      ln ? "row kernel: x and dy rows in registers, dx, per-block dw/db partials; then a column-sum kernel"
         : "row kernel: x and dy rows in registers, dx, per-block dw partials; then a column-sum kernel",
      [s, kind, ln](cudaStream_t st) {
        NormBackwardArgs a;
        a.kind = kind;
        a.x = s->x;
        a.dy = s->dy;
        a.weight = s->w;
        if (ln) {
          a.mean = s->mean;
          a.dbias = s->db;
        }
        a.rstd = s->rstd;
        a.dx = s->dx;
        a.dweight = s->dw;
        a.workspace = s->workspace;
        norm_backward(a, st);
      },
      poison_all, check, elements, bytes});
  return ladder;
}

}  // namespace fusekit::bench
