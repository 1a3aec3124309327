#include "bench/norm.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "fusekit/buffer.hpp"
#include "fusekit/dtype.hpp"
#include "fusekit/eager_rows.hpp"
#include "fusekit/error.hpp"
#include "fusekit/norm.hpp"
#include "fusekit/norm_quantize.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/pointwise.hpp"
#include "fusekit/pointwise_chain.hpp"
#include "fusekit/reference/epilogue.hpp"
#include "fusekit/reference/norm.hpp"
#include "fusekit/reference/softmax.hpp"
#include "fusekit/softmax.hpp"
#include "fusekit/transfer.hpp"

namespace fusekit::bench {

namespace {

constexpr std::int64_t kSweepFirst = 512, kSweepLast = 262144;
constexpr float kEps = 1e-5f;
// The per-tensor fp8 rung's scale: this much above the checked rows' max |y| / 448, as a delayed
// scaling recipe's amax history leaves room. The unchecked rows of these uniform inputs reach a
// few percent past the checked rows' max at most, and the rung's check fails if any row reaches
// the scale's limit (its recorded amax above 448·scale).
constexpr double kTensorScaleMargin = 1.25;
// A recorded amax may fall this far (relative) below the checked rows' double max |y|: y is f32.
constexpr double kAmaxTolerance = 1e-3;

EpilogueSpec bias_gelu_residual() { return EpilogueSpec{}.bias().gelu_tanh().residual(); }

struct RowOpState {
  RowOpOptions o;
  DeviceTensor x, r, w, b, h, t, s, y, mean, rstd, max, sum;
  DeviceTensor q, q_scale;  // norms: y quantized to e4m3 with a scale per row
  DeviceTensor tensor_scale, amax;  // norms: the given scale of the whole tensor, max |y| recorded
  double tensor_scale_value = 0;    // what tensor_scale holds
  std::vector<std::int64_t> rows;  // checked rows
  reference::Matrix expected;      // y of the checked rows
  reference::Matrix expected_h;    // add_rmsnorm: h of the checked rows
};

}  // namespace

std::vector<std::int64_t> sweep_row_lengths() {
  std::vector<std::int64_t> lengths;
  for (std::int64_t n = kSweepFirst; n <= kSweepLast; n *= 2) lengths.push_back(n);
  return lengths;
}

LadderRun make_row_op_ladder(const RowOpOptions& o) {
  const auto [m, n] = std::pair{o.rows, o.cols};
  require(m > 0 && n > 0, "shape (rows, cols)", "both positive", fmt::format("{}, {}", m, n));
  require(o.dtype == DType::BF16 || o.dtype == DType::F16 || o.dtype == DType::F32, "dtype", "bf16, f16 or f32",
          dtype_name(o.dtype));
  const std::uint64_t seed = seed_or_fresh(o.seed);

  auto s = std::make_shared<RowOpState>();
  s->o = o;
  const DType dt = o.dtype;
  s->x = DeviceTensor(dt, {m, n});
  s->w = DeviceTensor(dt, {n});
  s->b = DeviceTensor(dt, {n});
  s->t = DeviceTensor(dt, {m, n});
  s->y = DeviceTensor(dt, {m, n});
  s->mean = DeviceTensor(DType::F32, {m});
  s->rstd = DeviceTensor(DType::F32, {m});
  fill_uniform(s->x, seed, -2.0f, 2.0f);
  fill_uniform(s->w, seed + 1, 0.5f, 1.5f);
  fill_uniform(s->b, seed + 2, -0.5f, 0.5f);
  if (o.op == RowOp::AddRmsNorm || o.op == RowOp::BiasGeluResidual) {
    s->r = DeviceTensor(dt, {m, n});
    s->h = DeviceTensor(dt, {m, n});
    fill_uniform(s->r, seed + 3, -2.0f, 2.0f);
  }
  if (o.op == RowOp::RmsNorm || o.op == RowOp::LayerNorm) {
    s->q = DeviceTensor(DType::E4M3, {m, n});
    s->q_scale = DeviceTensor(DType::F32, {m});
    s->tensor_scale = DeviceTensor(DType::F32, {1});
    s->amax = DeviceTensor(DType::F32, {1});
  }
  if (o.op == RowOp::Softmax) {
    s->s = DeviceTensor(dt, {m, n});
    s->max = DeviceTensor(DType::F32, {m});
    s->sum = DeviceTensor(DType::F32, {m});
  }

  s->rows = rows_to_check(m, o.scope, seed);
  const auto hx = sampled_rows(s->x, s->rows);
  const auto hw = download(s->w), hb = download(s->b);
  switch (o.op) {
    case RowOp::RmsNorm:
      s->expected = reference::norm_forward(NormKind::RmsNorm, hx, hw, {}, kEps).y;
      break;
    case RowOp::LayerNorm:
      s->expected = reference::norm_forward(NormKind::LayerNorm, hx, hw, hb, kEps).y;
      break;
    case RowOp::AddRmsNorm: {
      auto add = reference::add_norm_forward(NormKind::RmsNorm, hx, sampled_rows(s->r, s->rows), hw, {}, kEps);
      s->expected = std::move(add.norm.y);
      s->expected_h = std::move(add.residual);
      break;
    }
    case RowOp::Softmax: s->expected = reference::softmax_forward(hx); break;
    case RowOp::BiasGeluResidual: {
      reference::EpilogueInputs in;
      in.bias = hb;
      in.residual = sampled_rows(s->r, s->rows);
      s->expected = reference::apply_epilogue(bias_gelu_residual(), hx, in).out;
      break;
    }
  }
  double checked_amax = 0;  // max |y| over the checked rows
  for (const double v : s->expected.data) checked_amax = std::max(checked_amax, std::abs(v));
  if (s->tensor_scale.data()) {
    s->tensor_scale_value = round_to(DType::F32, kTensorScaleMargin * checked_amax / kE4m3Max);
    const double scale_value[] = {s->tensor_scale_value};
    upload(scale_value, s->tensor_scale);
  }
  const std::string what = s->rows.size() == static_cast<std::size_t>(m)
                               ? "every row vs CPU double reference"
                               : fmt::format("{} sampled rows vs CPU double reference (seed {})", s->rows.size(), seed);

  LadderRun ladder;
  ladder.ladder = std::string(row_op_name(o.op));
  ladder.shape = fmt::format("{}x{}", m, n);
  ladder.dtype = std::string(dtype_name(dt));
  ladder.baseline = "unfused";
  const double esz = static_cast<double>(dtype_size(dt));
  const double elements = static_cast<double>(m) * static_cast<double>(n);
  const double stat_bytes = static_cast<double>(m) * sizeof(float);
  auto check_y = [s, what] {
    Check c = check_rows(s->y, s->rows, s->expected, s->o.dtype, what);
    if (s->o.op == RowOp::AddRmsNorm && c.passed) {
      const Check h = check_rows(s->h, s->rows, s->expected_h, s->o.dtype, what);
      if (!h.passed) c = h;
    }
    return c;
  };
  auto poison_all = [s](cudaStream_t st) {
    poison(s->y, st);
    poison(s->t, st);
    if (s->h.data()) poison(s->h, st);
    if (s->s.data()) poison(s->s, st);
    if (s->q.data()) {
      poison(s->q, st);
      poison(s->q_scale, st);
    }
  };

  switch (o.op) {
    case RowOp::RmsNorm:
    case RowOp::LayerNorm: {
      const NormKind kind = o.op == RowOp::RmsNorm ? NormKind::RmsNorm : NormKind::LayerNorm;
      const bool ln = kind == NormKind::LayerNorm;
      const double bytes = esz * (2 * elements + (ln ? 2 : 1) * n) + (ln ? 2 : 1) * stat_bytes;
      ladder.rungs.push_back(Rung{
          "unfused", "row statistics kernel, then normalize kernel, then affine kernel",
          [s, kind, ln](cudaStream_t st) {
            eager::row_moments(kind, s->x, ln ? s->mean.view() : TensorView{}, s->rstd, kEps, st);
            eager::normalize(s->x, ln ? s->mean.view() : TensorView{}, s->rstd, s->t, st);
            eager::affine(s->t, s->w, ln ? s->b.view() : TensorView{}, s->y, st);
          },
          poison_all, check_y, elements, bytes});
      ladder.rungs.push_back(Rung{
          "fused", "one kernel: row in registers, statistics, normalize, affine",
          [s, kind, ln](cudaStream_t st) {
            NormForwardArgs a;
            a.kind = kind;
            a.x = s->x;
            a.weight = s->w;
            if (ln) {
              a.bias = s->b;
              a.mean = s->mean;
            }
            a.rstd = s->rstd;
            a.y = s->y;
            a.eps = kEps;
            norm_forward(a, st);
          },
          poison_all, check_y, elements, bytes});
      // The same norm with its output quantized for an fp8 GEMM: x read once, q written as one
      // byte per element, one scale per row.
      const double fp8_bytes = esz * (elements + (ln ? 2 : 1) * n) + elements;  // and the scales, if any
      const auto quantize_args = [s, kind, ln] {
        NormQuantizeArgs a;
        a.norm.kind = kind;
        a.norm.x = s->x;
        a.norm.weight = s->w;
        if (ln) a.norm.bias = s->b;
        a.norm.y = s->q;
        a.norm.eps = kEps;
        return a;
      };
      ladder.rungs.push_back(Rung{
          "fused_fp8", "one kernel: the norm, then y quantized to e4m3 with a scale per row (q·scale ≈ y)",
          [s, quantize_args](cudaStream_t st) {
            NormQuantizeArgs a = quantize_args();
            a.scale_mode = Fp8ScaleMode::PerRow;
            a.scale = s->q_scale;
            norm_quantize_forward(a, st);
          },
          poison_all, [s, what] { return check_scaled_rows(s->q, s->q_scale, s->rows, s->expected, what); }, elements,
          fp8_bytes + stat_bytes});
      // Delayed scaling: the scale is given, one for the tensor, and max |y| is recorded for the
      // next step's. (The amax is zeroed before the checked run only: max is idempotent over runs.)
      ladder.rungs.push_back(Rung{
          "fused_fp8_tensor",
          "one kernel: the norm, then y quantized to e4m3 with a given scale for the tensor, max |y| recorded",
          [s, quantize_args](cudaStream_t st) {
            NormQuantizeArgs a = quantize_args();
            a.scale_mode = Fp8ScaleMode::PerTensor;
            a.scale = s->tensor_scale;
            a.amax = s->amax;
            norm_quantize_forward(a, st);
          },
          [s, poison_all](cudaStream_t st) {
            poison_all(st);
            check_cuda(cudaMemsetAsync(s->amax.data(), 0, sizeof(float), st), "cudaMemsetAsync (amax)");
          },
          [s, what, checked_amax] {
            Check c = check_scaled_rows(s->q, s->tensor_scale_value, s->rows, s->expected, what);
            const double amax = download(s->amax)[0];
            const double limit = kE4m3Max * s->tensor_scale_value;
            if (!(amax >= checked_amax * (1 - kAmaxTolerance) && amax <= limit)) {
              c.passed = false;
              c.what += fmt::format("; recorded amax {} outside [{}, {}] (the checked rows' max |y|, 448·scale)",
                                    amax, checked_amax, limit);
            }
            return c;
          },
          elements, fp8_bytes});
      break;
    }
    case RowOp::AddRmsNorm: {
      const double bytes = esz * (4 * elements + n) + stat_bytes;
      ladder.rungs.push_back(Rung{
          "unfused", "add kernel, then row statistics, normalize and affine kernels",
          [s](cudaStream_t st) {
            eager::add(s->x, s->r, s->h, st);
            eager::row_moments(NormKind::RmsNorm, s->h, {}, s->rstd, kEps, st);
            eager::normalize(s->h, {}, s->rstd, s->t, st);
            eager::affine(s->t, s->w, {}, s->y, st);
          },
          poison_all, check_y, elements, bytes});
      ladder.rungs.push_back(Rung{"fused", "one kernel: residual add, row in registers, RMSNorm, affine",
                                  [s](cudaStream_t st) {
                                    AddNormForwardArgs a;
                                    a.norm.kind = NormKind::RmsNorm;
                                    a.norm.x = s->x;
                                    a.norm.weight = s->w;
                                    a.norm.rstd = s->rstd;
                                    a.norm.y = s->y;
                                    a.norm.eps = kEps;
                                    a.residual = s->r;
                                    a.residual_out = s->h;
                                    add_norm_forward(a, st);
                                  },
                                  poison_all, check_y, elements, bytes});
      break;
    }
    case RowOp::Softmax: {
      const double bytes = esz * 2 * elements;
      ladder.rungs.push_back(Rung{"unfused", "scale+mask kernel, row max kernel, exp-sum kernel, normalize kernel",
                                  [s](cudaStream_t st) {
                                    eager::scale_mask(s->x, 1.0f, Causal::No, s->s, st);
                                    eager::row_max(s->s, s->max, st);
                                    eager::row_exp_sum(s->s, s->max, s->sum, st);
                                    eager::exp_normalize(s->s, s->max, s->sum, s->y, st);
                                  },
                                  poison_all, check_y, elements, bytes});
      ladder.rungs.push_back(Rung{"fused", "one kernel: row in registers, online max and sum, normalize",
                                  [s](cudaStream_t st) { softmax_forward({s->x, s->y}, st); }, poison_all, check_y,
                                  elements, bytes});
      break;
    }
    case RowOp::BiasGeluResidual: {
      const double bytes = esz * (3 * elements + n);
      ladder.rungs.push_back(Rung{"unfused", "bias kernel, then GELU kernel, then add kernel",
                                  [s](cudaStream_t st) {
                                    add_bias(s->x, s->b, s->t, st);
                                    gelu(s->t, s->t, st);
                                    add(s->t, s->r, s->y, st);
                                  },
                                  poison_all, check_y, elements, bytes});
      ladder.rungs.push_back(Rung{"fused", "pointwise chain kernel: bias → gelu_tanh → residual, 16-byte vectors",
                                  [s](cudaStream_t st) {
                                    PointwiseChainArgs a{bias_gelu_residual(), s->x, {}, s->y};
                                    a.tensors.bias = s->b;
                                    a.tensors.residual = s->r;
                                    pointwise_chain(a, st);
                                  },
                                  poison_all, check_y, elements, bytes});
      break;
    }
  }
  return ladder;
}

}  // namespace fusekit::bench
