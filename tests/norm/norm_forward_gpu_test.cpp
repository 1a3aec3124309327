// The fused norm forwards against the double CPU reference: LayerNorm and RMSNorm, f32/f16/bf16,
// every row layout (warp rows, CTA rows, cluster-split rows), odd lengths, padded row strides,
// huge and tiny magnitudes, with and without weight and bias; residual add + norm (in place and
// not); norm + fp8 quantize per tensor and per row; and the argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/dtype.hpp"
#include "fusekit/error.hpp"
#include "fusekit/norm.hpp"
#include "fusekit/norm_quantize.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/norm.hpp"
#include "fusekit/transfer.hpp"
#include "norm/norm_cases.hpp"
#include "support/gpu.hpp"
#include "support/rows.hpp"
#include "support/compare.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;
using testing::to_matrix;

constexpr float kEps = 1e-5f;
// NOTE: mean and rstd are f32 results of sums over up to 262144 values.
constexpr double kStatTolerance = 1e-4;

using Shape = testing::RowShape;
using Padded = testing::PaddedRows;

constexpr auto& kShapes = testing::kRowShapes;

using Range = testing::ValueRange;

// Long rows of whole chunks are staged in shared memory (device::SharedRows) whatever the config.
template <class Config = device::OneTensorRows>
bool supported(DType dt, const Shape& s) {
  return testing::holds_row<Config, device::SharedRows>(dt, s);
}

void expect_stats(const TensorView& mean, const TensorView& rstd, const reference::NormForward& want, NormKind kind) {
  const auto got_rstd = download(rstd);
  for (std::size_t r = 0; r < got_rstd.size(); ++r) {
    EXPECT_NEAR(got_rstd[r], want.rstd[r], kStatTolerance * want.rstd[r]) << "rstd of row " << r;
    if (kind == NormKind::LayerNorm) {
      const double got_mean = download(mean)[r];
      EXPECT_NEAR(got_mean, want.mean[r], kStatTolerance * (std::abs(want.mean[r]) + 1.0 / want.rstd[r]))
          << "mean of row " << r;
    }
  }
}

using testing::NormCase;

// Why a test of long rows checked none of its shapes (skipped, not passed on nothing).
std::string no_long_rows(DType dt) {
  return "no " + std::string(dtype_name(dt)) +
         " row of this test fits this GPU's row layouts (rows this long take thread-block clusters, sm_90)";
}

class NormForwardGpu : public ::testing::TestWithParam<NormCase> {};

// norm_forward on rows of shape s drawn from `range` (with a weight and a bias when `affine`),
// y, mean and rstd poisoned first, against the CPU reference.
void check_norm_forward(NormKind kind, DType dt, const Shape& s, Range range, bool affine, std::uint64_t seed) {
  Padded x(dt, s), y(dt, s);
  DeviceTensor weight(dt, {s.n}), bias(dt, {s.n}), mean(DType::F32, {s.rows}), rstd(DType::F32, {s.rows});
  fill_uniform(x.view, seed, range.lo, range.hi);
  fill_uniform(weight, seed + 100, -2.0f, 2.0f);
  fill_uniform(bias, seed + 101, -1.0f, 1.0f);
  poison(y.view);
  poison(mean);
  poison(rstd);
  NormForwardArgs a;
  a.kind = kind;
  a.x = x.view;
  a.y = y.view;
  if (affine) {
    a.weight = weight;
    a.bias = bias;
  }
  if (kind == NormKind::LayerNorm) a.mean = mean;
  a.rstd = rstd;
  a.eps = kEps;
  norm_forward(a);
  const std::vector<double> w = affine ? download(weight) : std::vector<double>{};
  const std::vector<double> b = affine ? download(bias) : std::vector<double>{};
  const auto want = reference::norm_forward(kind, to_matrix(x.view), w, b, kEps);
  EXPECT_LE(rel_l2(download(y.view), want.y.data), bench::tolerance(dt));
  expect_stats(mean, rstd, want, kind);
}

TEST_P(NormForwardGpu, MatchesReferenceOnEveryLayout) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  const auto ranges = testing::norm_value_ranges(dt);
  for (const Shape& s : kShapes) {
    if (!supported(dt, s)) continue;
    for (std::size_t ri = 0; ri < std::size(ranges); ++ri) {
      const Range range = ranges[ri];
      const bool affine = ri % 2 == 0;
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " range [" << range.lo << ", "
                                        << range.hi << "]" << (affine ? " with weight, bias" : ""));
      check_norm_forward(kind, dt, s, range, affine, seed + ri);
    }
  }
}

// Long RMSNorm rows run on persistent CTAs that loop over rows, the next row's copy landing in a
// second shared buffer (or, where two buffers do not fit beside the weight and bias, after the
// row): more rows than CTA groups fit on the GPU, so every group takes several, both ways.
TEST_P(NormForwardGpu, StagedRowsLoopOverManyRows) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  // Rows too long to be read twice (more than 8192 chunks), with weight and bias: 150 16-bit rows
  // of 131072 and 80 f32 rows of 65536 in clusters of six 192-thread CTAs, two buffers (four
  // planes share the shared memory); 40 f32 rows of 262144 in 16-CTA clusters, one buffer.
  // LayerNorm takes the one-row-per-CTA staged kernel at these lengths.
  const Shape shapes[] = {{150, 131072, 131072}, {80, 65536, 65536}, {40, 262144, 262144}};
  int checked = 0;
  for (const Shape& s : shapes) {
    const bool f32 = dt == DType::F32;
    if (!supported(dt, s) || (s.n == 131072 && f32) || (s.n != 131072 && !f32)) continue;
    ++checked;
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n);
    check_norm_forward(kind, dt, s, {-2.0f, 2.0f}, true, seed);
  }
  if (checked == 0) GTEST_SKIP() << no_long_rows(dt);
}

// bf16 LayerNorm rows of 57344 and 65536 columns run on clusters of four-warp CTAs, a row per CTA
// at a time and one row buffer each (norm_quantize_persistent_kernel with y stored as bf16; 40960
// and 49152 are read twice): more rows than the GPU holds clusters, so every CTA takes several,
// around zero and far off it.
TEST_P(NormForwardGpu, SlicedRowsLoopOverManyRows) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : {Shape{151, 40960, 40960}, Shape{281, 49152, 49152}, Shape{271, 57344, 57344},
                         Shape{201, 65536, 65536}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n);
    check_norm_forward(kind, dt, s, {-3.0f, 3.0f}, true, seed);
    check_norm_forward(kind, dt, s, {100.0f, 104.0f}, false, seed + 7);
  }
}

// LayerNorm's one-pass sums Σh and Σh² lose bits when mean² ≫ variance: a near-constant row far
// off zero (its first element differing) must take the second, centred reduction, and a row whose
// first element lies 1000× the spread of the rest out (mean² ≪ variance: one pass) must not lose
// the rest; both must match the reference, also quantized to e4m3 (scale per row, amax recorded).
// The two kinds alternate, so rows that share a warp (16-bit rows of 200 columns: 8 lanes each;
// 99: 16) or a CTA (2000: two rows of 64 threads; f32 1000) branch apart around the second
// reduction (compute-sanitizer's synccheck sees a shared barrier or shuffle reached by part).
TEST_P(NormForwardGpu, RowsFarOffZeroOrWithAnOutlier) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : {Shape{16, 200, 200}, Shape{10, 99, 99}, Shape{8, 1000, 1000}, Shape{8, 2000, 2000},
                         Shape{6, 4096, 4096}, Shape{3, 3001, 3001}, Shape{2, 65536, 65536}}) {
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n);
    Padded x(dt, s), y(dt, s);
    DeviceTensor mean(DType::F32, {s.rows}), rstd(DType::F32, {s.rows});
    fill_uniform(x.view, seed, -1.0f, 1.0f);
    auto values = download(x.view);
    constexpr double kOutlier = 1000.0, kNearConstant = 50.0;
    for (std::int64_t i = 0; i < s.rows; ++i) {
      const auto first = static_cast<std::size_t>(i * s.n);
      if (i % 2 == 0) {
        values[first] = kOutlier;
      } else {
        for (std::int64_t j = 0; j < s.n; ++j) values[first + static_cast<std::size_t>(j)] = kNearConstant;
        values[first] = -kNearConstant;
      }
    }
    upload(values, x.view);
    poison(y.view);
    poison(mean);
    poison(rstd);
    NormForwardArgs a;
    a.kind = kind;
    a.x = x.view;
    a.y = y.view;
    if (kind == NormKind::LayerNorm) a.mean = mean;
    a.rstd = rstd;
    a.eps = kEps;
    norm_forward(a);
    const auto want = reference::norm_forward(kind, to_matrix(x.view), {}, {}, kEps);
    EXPECT_LE(rel_l2(download(y.view), want.y.data), bench::tolerance(dt));
    expect_stats(mean, rstd, want, kind);

    if (!supported<device::QuantizingRows>(dt, s)) continue;
    Padded q(DType::E4M3, s);
    DeviceTensor row_scale(DType::F32, {s.rows}), amax(DType::F32, {1});
    poison(q.view);
    poison(row_scale);
    poison(mean);
    poison(rstd);
    upload(std::vector<double>{0.0}, amax);
    NormQuantizeArgs qa;
    qa.norm = a;
    qa.norm.y = q.view;
    qa.scale_mode = Fp8ScaleMode::PerRow;
    qa.scale = row_scale;
    qa.amax = amax;
    norm_quantize_forward(qa);
    const auto hq = download(q.view), hs = download(row_scale);
    std::vector<double> dequant(hq.size());
    for (std::size_t e = 0; e < hq.size(); ++e) dequant[e] = hq[e] * hs[e / static_cast<std::size_t>(s.n)];
    EXPECT_LE(rel_l2(dequant, want.y.data), bench::tolerance(DType::E4M3)) << "e4m3";
    double want_amax = 0;
    for (double v : want.y.data) want_amax = std::max(want_amax, std::abs(v));
    EXPECT_NEAR(download(amax)[0], want_amax, 1e-2 * want_amax);
    expect_stats(mean, rstd, want, kind);
  }
}

// Long rows are read twice (device/row/reread_row_tile.cuh): in place, each thread's second read
// of a chunk must come before its store there, and no other thread's store may land first.
TEST_P(NormForwardGpu, InPlaceLongRows) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  int checked = 0;
  for (const Shape& s : {Shape{5, 32768, 32768}, Shape{3, 65536, 65536}, Shape{2, 40000, 40000}}) {
    if (!supported(dt, s)) continue;
    ++checked;
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n);
    Padded x(dt, s);
    DeviceTensor weight(dt, {s.n}), bias(dt, {s.n});
    fill_uniform(x.view, seed, -3.0f, 3.0f);
    fill_uniform(weight, seed + 1, -2.0f, 2.0f);
    fill_uniform(bias, seed + 2, -1.0f, 1.0f);
    const auto before = to_matrix(x.view);
    NormForwardArgs a;
    a.kind = kind;
    a.x = x.view;
    a.y = x.view;  // in place
    a.weight = weight;
    if (kind == NormKind::LayerNorm) a.bias = bias;
    a.eps = kEps;
    norm_forward(a);
    const auto want = reference::norm_forward(kind, before, download(weight),
                                              kind == NormKind::LayerNorm ? download(bias) : std::vector<double>{}, kEps);
    EXPECT_LE(rel_l2(download(x.view), want.y.data), bench::tolerance(dt));
  }
  if (checked == 0) GTEST_SKIP() << no_long_rows(dt);
}

TEST_P(NormForwardGpu, InPlaceAndBatched) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  constexpr std::int64_t kBatch = 3, kRows = 5, kN = 777, kLd = 800, kBatchStride = 4100;
  DeviceBuffer buf(static_cast<std::size_t>(kBatch * kBatchStride) * dtype_size(dt));
  const auto x = TensorView::batched(buf.data(), dt, kBatch, kRows, kN, kLd, kBatchStride);
  fill_uniform(x, seed, -3.0f, 3.0f);
  const auto before = download(x);
  NormForwardArgs a;
  a.kind = kind;
  a.x = x;
  a.y = x;  // in place
  norm_forward(a);
  reference::Matrix m(kBatch * kRows, kN);
  m.data = before;
  const auto want = reference::norm_forward(kind, m, {}, {}, a.eps);
  EXPECT_LE(rel_l2(download(x), want.y.data), bench::tolerance(dt));
}

TEST_P(NormForwardGpu, ResidualAddThenNorm) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  const auto ranges = testing::norm_value_ranges(dt);
  for (const Shape& s : kShapes) {
    if (!supported(dt, s)) continue;
    for (std::size_t ri = 0; ri < std::size(ranges); ++ri) {
      // Both ways for every range: in place (residual_out over residual) on the even ranges, with
      // a weight and a bias (LayerNorm's mean saved too) on the first two.
      const Range range = ranges[ri];
      const bool in_place = ri % 2 == 0, affine = ri < 2;
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " range [" << range.lo << ", "
                                        << range.hi << "]" << (in_place ? " in place" : "")
                                        << (affine ? " with weight, bias" : ""));
      Padded x(dt, s), residual(dt, s), residual_out(dt, s), y(dt, s);
      DeviceTensor weight(dt, {s.n}), bias(dt, {s.n}), mean(DType::F32, {s.rows}), rstd(DType::F32, {s.rows});
      fill_uniform(x.view, seed + 4 * ri, range.lo, range.hi);
      fill_uniform(residual.view, seed + 4 * ri + 1, range.lo, range.hi);  // h stays finite in f16 (2·3e4)
      fill_uniform(weight, seed + 4 * ri + 2, 0.5f, 1.5f);
      fill_uniform(bias, seed + 4 * ri + 3, -1.0f, 1.0f);
      const auto hx = download(x.view), hr = download(residual.view);
      poison(y.view);
      poison(residual_out.view);
      poison(mean);
      poison(rstd);
      AddNormForwardArgs a;
      a.norm.kind = kind;
      a.norm.x = x.view;
      if (affine) {
        a.norm.weight = weight;
        if (kind == NormKind::LayerNorm) a.norm.bias = bias;
      }
      a.norm.y = y.view;
      if (kind == NormKind::LayerNorm) a.norm.mean = mean;
      a.norm.rstd = rstd;
      a.residual = residual.view;
      a.residual_out = in_place ? residual.view : residual_out.view;
      add_norm_forward(a);
      // residual_out = x + residual rounded to the dtype; y, mean and rstd those of exactly that.
      std::vector<double> want_h(hx.size());
      for (std::size_t i = 0; i < hx.size(); ++i) want_h[i] = round_to(dt, hx[i] + hr[i]);
      const auto h = to_matrix(a.residual_out);
      EXPECT_LE(rel_l2(h.data, want_h), bench::tolerance(dt));
      const std::vector<double> w = affine ? download(weight) : std::vector<double>{};
      const std::vector<double> b = affine && kind == NormKind::LayerNorm ? download(bias) : std::vector<double>{};
      const auto want = reference::norm_forward(kind, h, w, b, a.norm.eps);
      EXPECT_LE(rel_l2(download(y.view), want.y.data), bench::tolerance(dt));
      expect_stats(mean, rstd, want, kind);
    }
  }
}

// Long add+norm rows sum h = x + residual in the add pass (device/norm/norm_forward.cuh): rows far
// off zero (LayerNorm's mean² ≫ variance) must still take the centred second reduction, which reads
// h back from residual_out, and the statistics must be those of the rounded h that was stored.
TEST_P(NormForwardGpu, ResidualRowsFarOffZero) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : {Shape{4, 4096, 4096}, Shape{3, 65536, 65536}, Shape{2, 131072, 131072}}) {
    if (!supported(dt, s)) continue;
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n);
    Padded x(dt, s), residual(dt, s), residual_out(dt, s), y(dt, s);
    DeviceTensor mean(DType::F32, {s.rows}), rstd(DType::F32, {s.rows});
    fill_uniform(x.view, seed, 49.0f, 51.0f);
    fill_uniform(residual.view, seed + 1, -0.5f, 0.5f);
    const auto hx = download(x.view), hr = download(residual.view);
    poison(y.view);
    poison(residual_out.view);
    poison(mean);
    poison(rstd);
    AddNormForwardArgs a;
    a.norm.kind = kind;
    a.norm.x = x.view;
    a.norm.y = y.view;
    if (kind == NormKind::LayerNorm) a.norm.mean = mean;
    a.norm.rstd = rstd;
    a.norm.eps = kEps;
    a.residual = residual.view;
    a.residual_out = residual_out.view;
    add_norm_forward(a);
    std::vector<double> want_h(hx.size());
    for (std::size_t i = 0; i < hx.size(); ++i) want_h[i] = round_to(dt, hx[i] + hr[i]);
    const auto h = to_matrix(residual_out.view);
    EXPECT_LE(rel_l2(h.data, want_h), bench::tolerance(dt));
    const auto want = reference::norm_forward(kind, h, {}, {}, kEps);
    EXPECT_LE(rel_l2(download(y.view), want.y.data), bench::tolerance(dt));
    expect_stats(mean, rstd, want, kind);
  }
}

// The relative L2 error of each row of `got` (rows × n, row-major) against `want`, the largest.
double worst_row_rel_l2(const std::vector<double>& got, const std::vector<double>& want, std::int64_t rows,
                        std::int64_t n) {
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto first = static_cast<std::ptrdiff_t>(r * n), last = static_cast<std::ptrdiff_t>((r + 1) * n);
    const std::vector<double> g(got.begin() + first, got.begin() + last), w(want.begin() + first, want.begin() + last);
    worst = std::max(worst, rel_l2(g, w));
  }
  return worst;
}

// The affine terms a quantizing norm is given.
enum class AffineTerms : std::uint8_t { None, Weight, Bias, WeightAndBias };

// One quantizing norm of x in [lo, hi] on shape s with `terms`, against the double reference: per
// row (each row's error, its fp8 range, its statistics), per tensor with amax, per tensor without
// amax.
void check_quantize(NormKind kind, DType dt, const Shape& s, std::uint64_t seed, AffineTerms terms, float lo,
                    float hi) {
  const bool with_weight = terms == AffineTerms::Weight || terms == AffineTerms::WeightAndBias;
  const bool with_bias = terms == AffineTerms::Bias || terms == AffineTerms::WeightAndBias;
  SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << (with_weight ? " with weight" : "")
                                    << (with_bias ? " with bias" : "") << " x in [" << lo << ", " << hi << "]");
  Padded x(dt, s), q(DType::E4M3, s);
  DeviceTensor weight(dt, {s.n}), bias(dt, {s.n}), row_scale(DType::F32, {s.rows}), tensor_scale(DType::F32, {1}),
      amax(DType::F32, {1}), mean(DType::F32, {s.rows}), rstd(DType::F32, {s.rows});
  fill_uniform(x.view, seed, lo, hi);
  fill_uniform(weight, seed + 1, -2.0f, 2.0f);
  fill_uniform(bias, seed + 2, -1.0f, 1.0f);
  // One element of one row (both drawn at random) far out: that row's max |y| is then several
  // times every other row's, so an amax that missed a row or a CTA cannot pass.
  {
    std::vector<double> hx = download(x.view);
    const auto spike = static_cast<std::size_t>((seed * 0x9E3779B97F4A7C15ull >> 17) % hx.size());
    hx[spike] = round_to(dt, hi + 64.0 * (static_cast<double>(hi) - lo));
    upload(hx, x.view);
  }
  const auto w = with_weight ? download(weight) : std::vector<double>{};
  const auto b = with_bias ? download(bias) : std::vector<double>{};
  const auto want = reference::norm_forward(kind, to_matrix(x.view), w, b, kEps);
  double want_amax = 0;
  for (double v : want.y.data) want_amax = std::max(want_amax, std::abs(v));

  // Per row: q·scale[row] ≈ y, scale[row] = max |y of the row| / 448, so every row that is not
  // all zero reaches ±448.
  poison(q.view);
  poison(row_scale);
  poison(mean);
  poison(rstd);
  NormQuantizeArgs a;
  a.norm.kind = kind;
  a.norm.x = x.view;
  if (with_weight) a.norm.weight = weight;
  if (with_bias) a.norm.bias = bias;
  if (kind == NormKind::LayerNorm) a.norm.mean = mean;
  a.norm.rstd = rstd;
  a.norm.y = q.view;
  a.scale_mode = Fp8ScaleMode::PerRow;
  a.scale = row_scale;
  norm_quantize_forward(a);
  const auto hq = download(q.view), hs = download(row_scale);
  std::vector<double> dequant(hq.size());
  // NOTE: y's f32 statistics hold to kStatTolerance, its max to a few times that.
  constexpr double kScaleTolerance = 1e-3;
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double row_max = 0, want_row_max = 0;
    for (std::int64_t j = 0; j < s.n; ++j) {
      const auto e = static_cast<std::size_t>(r * s.n + j);
      dequant[e] = hq[e] * hs[static_cast<std::size_t>(r)];
      row_max = std::max(row_max, std::abs(hq[e]));
      want_row_max = std::max(want_row_max, std::abs(want.y.data[e]));
    }
    if (want_row_max == 0) continue;
    EXPECT_EQ(row_max, kE4m3Max) << "row " << r;
    EXPECT_NEAR(hs[static_cast<std::size_t>(r)], want_row_max / kE4m3Max, kScaleTolerance * want_row_max / kE4m3Max)
        << "scale of row " << r;
  }
  EXPECT_LE(worst_row_rel_l2(dequant, want.y.data, s.rows, s.n), bench::tolerance(DType::E4M3));
  expect_stats(mean, rstd, want, kind);

  // Per tensor, with amax recorded.
  const std::vector<double> scale{want_amax / kE4m3Max};
  upload(scale, tensor_scale);
  upload(std::vector<double>{0.0}, amax);
  poison(q.view);
  a.scale_mode = Fp8ScaleMode::PerTensor;
  a.scale = tensor_scale;
  a.amax = amax;
  norm_quantize_forward(a);
  const auto hq2 = download(q.view);
  for (std::size_t e = 0; e < hq2.size(); ++e) dequant[e] = hq2[e] * scale[0];
  EXPECT_LE(rel_l2(dequant, want.y.data), bench::tolerance(DType::E4M3));
  EXPECT_NEAR(download(amax)[0], want_amax, kScaleTolerance * want_amax);

  // Per tensor without amax (no row's max |y| is needed).
  poison(q.view);
  a.amax = {};
  norm_quantize_forward(a);
  const auto hq3 = download(q.view);
  for (std::size_t e = 0; e < hq3.size(); ++e) dequant[e] = hq3[e] * scale[0];
  EXPECT_LE(rel_l2(dequant, want.y.data), bench::tolerance(DType::E4M3)) << "per tensor, no amax";
}

TEST_P(NormForwardGpu, QuantizesToFp8) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : kShapes) {
    if (!supported<device::QuantizingRows>(dt, s)) continue;
    // NOTE: without bias, RMSNorm folds max |y| into the sum of squares' reduction, in a kernel
    // compiled for that case alone (vector access, rows in registers).
    // Rows around 0 and rows far from it (LayerNorm's affine in two forms: |mean·rstd| <= 16 or not),
    // with each combination of weight and bias.
    for (const auto& [terms, lo, hi] :
         {std::tuple{AffineTerms::WeightAndBias, -3.0f, 3.0f}, std::tuple{AffineTerms::Weight, -3.0f, 3.0f},
          std::tuple{AffineTerms::WeightAndBias, 100.0f, 104.0f}, std::tuple{AffineTerms::Weight, 100.0f, 104.0f},
          std::tuple{AffineTerms::None, -3.0f, 3.0f}, std::tuple{AffineTerms::Bias, 100.0f, 104.0f}})
      check_quantize(kind, dt, s, seed, terms, lo, hi);
  }
}

// More rows than the GPU holds row groups at once: the persistent quantizing kernel's groups take
// several rows each (its row buffers and their barriers' phases alternate, and its all-reduces'
// scratch slots), on rows of one warp (1024 16-bit columns), of several, and of whole warps past
// the row (2056: three warps of four chunks, 3072 columns); bf16 LayerNorm rows of 2048, 6144,
// 12288 and 16384 columns take eight chunks per thread (one warp, three at 96 registers, six,
// eight), RMSNorm's of 12288, 16384 and 24576 too (twelve warps; any number of rows: a row per
// group); LayerNorm's and RMSNorm's of 18432 and 20480 at 96 registers (two groups of 9–10
// warps per SM, the weight and bias as bf16, one row buffer each); LayerNorm's of 12288–26624
// and 32768 and RMSNorm's of 26624 and 32768 keep the weight and bias as bf16 in shared memory
// (AffineFormat::Native; WarpCombine::Butterfly past eight warps, and at odd counts, which pad
// with the op's identity: LayerNorm's seven warps at 14336, eleven at 22528, thirteen at 26624),
// LayerNorm's of 28672–32768 with one row buffer per group (RowBuffers::One); bf16 LayerNorm
// rows of 36864 columns and RMSNorm's of 36864 and 40960 on one CTA of 18 and 20 warps (one row
// buffer); LayerNorm's of 40960–65536 columns split over clusters of five to eight CTAs of four
// warps (slices, one row buffer each; with a scale per row, their all-reduces overlapped),
// LayerNorm's of 45056 and 61440 and RMSNorm's of 65536 over clusters of two CTAs (halves of 11,
// 15 and 16 warps; LayerNorm's of 61440 with one row buffer),
// LayerNorm's and RMSNorm's of 131072 and 262144 over clusters of eight CTAs of 8 and 16 warps;
// RMSNorm's without a bias of 22528–28672 columns (two groups per SM) and of 49152 and 57344 (one
// CTA of 24 and 28 warps) keep their rows packed (NormForms::RmsNormUnbiased, at 72 registers);
// other rows of 24576 and more columns are read again from L2.
TEST_P(NormForwardGpu, QuantizesManyRowsPerGroup) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : {Shape{9001, 1024, 1024}, Shape{3001, 4096, 4104}, Shape{2503, 2056, 2056},
                         Shape{4099, 2048, 2048}, Shape{1501, 6144, 6144},
                         Shape{1001, 12288, 12288}, Shape{901, 14336, 14336}, Shape{777, 16384, 16384},
                         Shape{613, 18432, 18432}, Shape{687, 20480, 20480}, Shape{505, 22528, 22528},
                         Shape{555, 24576, 24576}, Shape{433, 26624, 26624}, Shape{377, 28672, 28672},
                         Shape{333, 32768, 32768}, Shape{171, 36864, 36864}, Shape{151, 40960, 40960},
                         Shape{163, 45056, 45056}, Shape{281, 49152, 49152}, Shape{271, 57344, 57344},
                         Shape{149, 61440, 61440}, Shape{201, 65536, 65536}, Shape{71, 131072, 131072},
                         Shape{37, 262144, 262144}}) {
    if (!supported<device::QuantizingRows>(dt, s)) continue;
    check_quantize(kind, dt, s, seed, AffineTerms::WeightAndBias, -3.0f, 3.0f);
    check_quantize(kind, dt, s, seed + 7, AffineTerms::Bias, 100.0f, 104.0f);
    if (kind == NormKind::RmsNorm && s.n >= 18432) {
      check_quantize(kind, dt, s, seed + 13, AffineTerms::Weight, -3.0f, 3.0f);
      check_quantize(kind, dt, s, seed + 17, AffineTerms::None, 100.0f, 104.0f);
    }
  }
}

// Under an SM cap (set_sm_limit) the persistent quantizing kernels launch fewer groups, so each
// takes more rows: 7 SMs' worth of CTAs (a count that clusters of 2 to 8 CTAs do not divide) on
// rows of one and two warps, of eight, and split over clusters (65536 and 131072 columns).
TEST_P(NormForwardGpu, QuantizesUnderAnSmLimit) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  constexpr int kCappedSms = 7;
  testing::ScopedSmLimit limit(kCappedSms);
  for (const Shape& s : {Shape{1001, 2048, 2048}, Shape{777, 4096, 4096}, Shape{301, 16384, 16384},
                         Shape{67, 65536, 65536}, Shape{19, 131072, 131072}}) {
    if (!supported<device::QuantizingRows>(dt, s)) continue;
    check_quantize(kind, dt, s, seed, AffineTerms::WeightAndBias, -3.0f, 3.0f);
  }
}

// A NaN in one row of x makes that row's scale NaN and the tensor's amax NaN (device/amax.cuh:
// fmaxf dropped it, giving the row scale 1 and the amax of the other rows), on rows of a warp,
// of CTAs (one and several rows per group), of clusters, and RMSNorm's folded amax (no bias);
// every other row still matches the reference, so the NaN reaches no other row's reductions.
TEST_P(NormForwardGpu, ANaNRowGetsANaNScaleAndAmax) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : {Shape{10, 99, 99}, Shape{8, 2000, 2000}, Shape{901, 1024, 1024}, Shape{301, 4096, 4104},
                         Shape{133, 12288, 12288}, Shape{7, 26624, 26624}, Shape{5, 40960, 40960},
                         Shape{3, 65536, 65536}}) {
    if (!supported<device::QuantizingRows>(dt, s)) continue;
    for (const bool with_bias : {true, false}) {
      const auto nan_row = static_cast<std::int64_t>(seed % static_cast<std::uint64_t>(s.rows));
      const auto nan_col = static_cast<std::int64_t>(seed / 7 % static_cast<std::uint64_t>(s.n));
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << (with_bias ? " with bias" : "") << ", NaN at ("
                                        << nan_row << ", " << nan_col << ")");
      Padded x(dt, s), q(DType::E4M3, s);
      DeviceTensor weight(dt, {s.n}), bias(dt, {s.n}), row_scale(DType::F32, {s.rows}),
          tensor_scale(DType::F32, {1}), amax(DType::F32, {1});
      fill_uniform(x.view, seed, -3.0f, 3.0f);
      fill_uniform(weight, seed + 1, -2.0f, 2.0f);
      fill_uniform(bias, seed + 2, -1.0f, 1.0f);
      std::vector<double> hx = download(x.view);
      hx[static_cast<std::size_t>(nan_row * s.n + nan_col)] = std::numeric_limits<double>::quiet_NaN();
      upload(hx, x.view);
      const auto want = reference::norm_forward(kind, to_matrix(x.view), download(weight),
                                                with_bias ? download(bias) : std::vector<double>{}, kEps);

      poison(q.view);
      poison(row_scale);
      NormQuantizeArgs a;
      a.norm.kind = kind;
      a.norm.x = x.view;
      a.norm.weight = weight;
      if (with_bias) a.norm.bias = bias;
      a.norm.y = q.view;
      a.norm.eps = kEps;
      a.scale_mode = Fp8ScaleMode::PerRow;
      a.scale = row_scale;
      norm_quantize_forward(a);
      const auto hq = download(q.view), hs = download(row_scale);
      EXPECT_TRUE(std::isnan(hs[static_cast<std::size_t>(nan_row)])) << "scale of the NaN row";
      std::vector<double> got, rest;
      double want_amax = 0;
      for (std::int64_t r = 0; r < s.rows; ++r) {
        if (r == nan_row) continue;
        for (std::int64_t j = 0; j < s.n; ++j) {
          const auto e = static_cast<std::size_t>(r * s.n + j);
          got.push_back(hq[e] * hs[static_cast<std::size_t>(r)]);
          rest.push_back(want.y.data[e]);
          want_amax = std::max(want_amax, std::abs(want.y.data[e]));
        }
      }
      EXPECT_LE(rel_l2(got, rest), bench::tolerance(DType::E4M3)) << "the other rows";

      // Per tensor, with amax recorded.
      upload(std::vector<double>{want_amax / kE4m3Max}, tensor_scale);
      upload(std::vector<double>{0.0}, amax);
      a.scale_mode = Fp8ScaleMode::PerTensor;
      a.scale = tensor_scale;
      a.amax = amax;
      norm_quantize_forward(a);
      EXPECT_TRUE(std::isnan(download(amax)[0])) << "amax " << download(amax)[0];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KindsAndDtypes, NormForwardGpu, testing::norm_cases(), testing::norm_case_name);

TEST(NormForwardGpuErrors, RejectsBadArguments) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor x(DType::BF16, {4, 64}), y(DType::BF16, {4, 64}), y_short(DType::BF16, {4, 63}),
      y32(DType::F32, {4, 64}), w(DType::BF16, {63}), w32(DType::F32, {64}), stats(DType::F32, {3});
  NormForwardArgs a;
  a.x = x;
  a.y = y_short;
  EXPECT_THROW(norm_forward(a), Error);
  a.y = y32;
  EXPECT_THROW(norm_forward(a), Error);
  a.y = y;
  a.weight = w;
  EXPECT_THROW(norm_forward(a), Error);
  a.weight = w32;
  EXPECT_THROW(norm_forward(a), Error);
  a.weight = {};
  a.rstd = stats;  // 3 entries for 4 rows
  EXPECT_THROW(norm_forward(a), Error);
  a.rstd = {};
  a.eps = -1.0f;
  EXPECT_THROW(norm_forward(a), Error);
  a.eps = kEps;
  EXPECT_NO_THROW(norm_forward(a));
  // A row too long for any layout is Unsupported, naming the limit.
  // 2 MiB rows: past 16 CTAs of shared memory.
  DeviceTensor long_x(DType::F32, {1, 524288}), long_y(DType::F32, {1, 524288});
  a.x = long_x;
  a.y = long_y;
  try {
    norm_forward(a);
    ADD_FAILURE() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

}  // namespace
}  // namespace fusekit
