// The fused norm backward against the double CPU reference: LayerNorm and RMSNorm, f32/f16/bf16,
// every row layout (rows sharing a CTA, CTA rows, cluster-split rows), several rows per CTA group
// (the row loop and its parameter-gradient partials), odd lengths, padded row strides, huge and
// tiny magnitudes, with and without weight, dweight and dbias; batched with dx aliasing dy;
// bit-identical results run to run; and the argument errors.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/error.hpp"
#include "fusekit/norm_backward.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/norm.hpp"
#include "fusekit/transfer.hpp"
#include "support/compare.hpp"
#include "support/expect_error.hpp"
#include "norm/norm_cases.hpp"
#include "support/gpu.hpp"
#include "support/rows.hpp"

namespace fusekit {
namespace {

using testing::expect_error;

using testing::bit_pattern;
using testing::rel_l2;
using testing::to_matrix;

constexpr float kEps = 1e-5f;

using Shape = testing::RowShape;
using Padded = testing::PaddedRows;

// Row lengths that take every kind of layout (device::plan_rows at 512-thread CTAs; bf16): rows
// sharing a CTA (1, 4, 16 lanes, rows not a multiple of the CTA's), a warp, 64 and 96 threads,
// full CTAs, clusters of 2 two-chunk CTAs and of 2–16 four-chunk CTAs (full and not; the
// element-by-element kernels split rows over 2–16 CTAs); odd lengths and padded row strides
// (aligned and not) take the element-by-element kernels, also clustered (12347, 40001); many
// rows give each CTA group a block of rows to loop over (301 at 32768: blocks of an odd
// number of rows, and a last block shorter than the others).
constexpr Shape kShapes[] = {{5, 8, 8},          {67, 128, 128},     {33, 200, 203},    {64, 1024, 1024},
                             {37, 1000, 1000},   {33, 2048, 2048},   {16, 4096, 4104},  {9, 3001, 3001},
                             {4, 16384, 16384},  {3, 12347, 12350},  {3, 40000, 40000}, {2, 40001, 40008},
                             {2, 65536, 65536},  {3001, 256, 256},   {1999, 777, 784},  {2000, 4096, 4096},
                             {301, 32768, 32768}, {3, 131072, 131072}, {2, 262144, 262144}};

using Range = testing::ValueRange;

// Vector rows split over clusters of more than two two-chunk CTAs, or too long for them, take
// four-chunk CTAs in clusters of up to 16 (sm_90).
bool supported(DType dt, const Shape& s) {
  if (current_device_info().cc_major >= 9)
    return testing::holds_row<device::LoopingTwoTensorRows, device::WideClusterRows>(dt, s);
  return testing::holds_row<device::LoopingTwoTensorRows>(dt, s);
}

// The forward's statistics of x as the f32 tensors the backward reads, and their exact values.
struct Stats {
  DeviceTensor mean, rstd;
  std::vector<double> host_mean, host_rstd;
};
Stats forward_stats(NormKind kind, const reference::Matrix& x, std::int64_t rows) {
  const auto f = reference::norm_forward(kind, x, {}, {}, kEps);
  Stats s{DeviceTensor(DType::F32, {rows}), DeviceTensor(DType::F32, {rows}), {}, {}};
  upload(f.rstd, s.rstd);
  s.host_rstd = download(s.rstd);
  if (kind == NormKind::LayerNorm) {
    upload(f.mean, s.mean);
    s.host_mean = download(s.mean);
  }
  return s;
}

using testing::NormCase;

class NormBackwardGpu : public ::testing::TestWithParam<NormCase> {};

TEST_P(NormBackwardGpu, MatchesReferenceOnEveryLayout) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  const auto ranges = testing::norm_value_ranges(dt);
  for (const Shape& s : kShapes) {
    if (!supported(dt, s)) continue;
    for (std::size_t ri = 0; ri < std::size(ranges); ++ri) {
      const Range range = ranges[ri];
      const bool affine = ri % 2 == 0;  // with weight, dweight and dbias; else none of them
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " range [" << range.lo << ", "
                                        << range.hi << "]" << (affine ? " with weight" : ""));
      Padded x(dt, s), dy(dt, s), dx(dt, s);
      DeviceTensor weight(dt, {s.n}), dweight(dt, {s.n}), dbias(dt, {s.n});
      DeviceTensor workspace(DType::U8, {static_cast<std::int64_t>(norm_backward_workspace_bytes(s.rows, s.n, dt))});
      fill_uniform(x.view, seed + ri, range.lo, range.hi);
      fill_uniform(dy.view, seed + 50 + ri, -1.0f, 1.0f);
      fill_uniform(weight, seed + 100, -2.0f, 2.0f);
      poison(dx.view);
      poison(dweight);
      poison(dbias);
      const auto hx = to_matrix(x.view);
      const Stats stats = forward_stats(kind, hx, s.rows);
      NormBackwardArgs a;
      a.kind = kind;
      a.x = x.view;
      a.dy = dy.view;
      a.dx = dx.view;
      if (kind == NormKind::LayerNorm) a.mean = stats.mean;
      a.rstd = stats.rstd;
      if (affine) {
        a.weight = weight;
        a.dweight = dweight;
        a.dbias = dbias;
        a.workspace = workspace;
      }
      norm_backward(a);
      const std::vector<double> w = affine ? download(weight) : std::vector<double>{};
      const auto want = reference::norm_backward(kind, to_matrix(dy.view), hx, w, stats.host_mean, stats.host_rstd);
      EXPECT_LE(rel_l2(download(dx.view), want.dx.data), bench::tolerance(dt));
      if (affine) {
        EXPECT_LE(rel_l2(download(dweight), want.dweight), bench::tolerance(dt)) << "dweight";
        EXPECT_LE(rel_l2(download(dbias), want.dbias), bench::tolerance(dt)) << "dbias";
      }
    }
  }
}

// The parameter gradients are reduced in a fixed order: two runs give the same bits.
TEST_P(NormBackwardGpu, BitIdenticalRunToRun) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  for (const Shape& s : {Shape{4097, 1024, 1024}, Shape{1000, 3001, 3001}, Shape{64, 32768, 32768}}) {
    if (!supported(dt, s)) continue;
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n);
    Padded x(dt, s), dy(dt, s);
    DeviceTensor weight(dt, {s.n});
    DeviceTensor workspace(DType::U8, {static_cast<std::int64_t>(norm_backward_workspace_bytes(s.rows, s.n, dt))});
    fill_uniform(x.view, seed, -3.0f, 3.0f);
    fill_uniform(dy.view, seed + 1, -1.0f, 1.0f);
    fill_uniform(weight, seed + 2, 0.5f, 1.5f);
    const Stats stats = forward_stats(kind, to_matrix(x.view), s.rows);
    std::vector<std::uint8_t> first[3];
    for (int run = 0; run < 2; ++run) {
      Padded dx(dt, s);
      DeviceTensor dweight(dt, {s.n}), dbias(dt, {s.n});
      poison(workspace);
      NormBackwardArgs a;
      a.kind = kind;
      a.x = x.view;
      a.dy = dy.view;
      a.weight = weight;
      if (kind == NormKind::LayerNorm) a.mean = stats.mean;
      a.rstd = stats.rstd;
      a.dx = dx.view;
      a.dweight = dweight;
      a.dbias = dbias;
      a.workspace = workspace;
      norm_backward(a);
      const std::vector<std::uint8_t> got[3] = {bit_pattern(dx.view), bit_pattern(dweight), bit_pattern(dbias)};
      for (int t = 0; t < 3; ++t) {
        if (run == 0) first[t] = got[t];
        else EXPECT_TRUE(first[t] == got[t]) << "output " << t << " (dx, dweight, dbias) differs between runs";
      }
    }
  }
}

// [batch, rows, n] with padded row and batch strides; dx written over dy; dbias alone. Rows read
// element by element, and rows split over a cluster (vector access) whose blocks of rows cross
// batches.
TEST_P(NormBackwardGpu, BatchedInPlace) {
  FUSEKIT_REQUIRE_GPU();
  const auto [kind, dt] = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Batched {
    std::int64_t batch, rows, n, ld, batch_stride;
  };
  constexpr Batched kCases[] = {{3, 50, 777, 800, 40100}, {3, 7, 16384, 16392, 7 * 16392 + 8}};
  for (const Batched& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.rows << "x" << c.n);
    const std::size_t bytes = static_cast<std::size_t>(c.batch * c.batch_stride) * dtype_size(dt);
    DeviceBuffer xb(bytes), dyb(bytes);
    const auto x = TensorView::batched(xb.data(), dt, c.batch, c.rows, c.n, c.ld, c.batch_stride);
    const auto dy = TensorView::batched(dyb.data(), dt, c.batch, c.rows, c.n, c.ld, c.batch_stride);
    fill_uniform(x, seed, -3.0f, 3.0f);
    fill_uniform(dy, seed + 1, -1.0f, 1.0f);
    reference::Matrix hx(c.batch * c.rows, c.n), hdy(c.batch * c.rows, c.n);
    hx.data = download(x);
    hdy.data = download(dy);
    const Stats stats = forward_stats(kind, hx, c.batch * c.rows);
    DeviceTensor dbias(dt, {c.n});
    DeviceTensor workspace(DType::U8,
                           {static_cast<std::int64_t>(norm_backward_workspace_bytes(c.batch * c.rows, c.n, dt))});
    poison(dbias);
    NormBackwardArgs a;
    a.kind = kind;
    a.x = x;
    a.dy = dy;
    a.dx = dy;  // in place
    if (kind == NormKind::LayerNorm) a.mean = stats.mean;
    a.rstd = stats.rstd;
    a.dbias = dbias;
    a.workspace = workspace;
    norm_backward(a);
    const auto want = reference::norm_backward(kind, hdy, hx, {}, stats.host_mean, stats.host_rstd);
    EXPECT_LE(rel_l2(download(dy), want.dx.data), bench::tolerance(dt));
    EXPECT_LE(rel_l2(download(dbias), want.dbias), bench::tolerance(dt));
  }
}

INSTANTIATE_TEST_SUITE_P(KindsAndDtypes, NormBackwardGpu, testing::norm_cases(), testing::norm_case_name);

TEST(NormBackwardGpuErrors, RejectsBadArguments) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor x(DType::BF16, {4, 64}), dy(DType::BF16, {4, 64}), dx(DType::BF16, {4, 64}),
      dx_short(DType::BF16, {4, 63}), dx32(DType::F32, {4, 64}), w(DType::BF16, {63}), dw(DType::BF16, {64}),
      stats(DType::F32, {4}), stats3(DType::F32, {3}), tiny_workspace(DType::U8, {16});
  DeviceTensor workspace(DType::U8, {static_cast<std::int64_t>(norm_backward_workspace_bytes(4, 64, DType::BF16))});
  const auto valid = [&] {
    NormBackwardArgs a;
    a.kind = NormKind::LayerNorm;
    a.x = x;
    a.dy = dy;
    a.dx = dx;
    a.mean = stats;
    a.rstd = stats;
    return a;
  };
  auto a = valid();
  a.dx = dx_short;
  expect_error([&] { norm_backward(a); }, "dx", ErrorKind::InvalidArgument);
  a = valid();
  a.dx = dx32;
  expect_error([&] { norm_backward(a); }, "dx dtype", ErrorKind::InvalidArgument);
  a = valid();
  a.weight = w;
  expect_error([&] { norm_backward(a); }, "weight", ErrorKind::InvalidArgument);
  a = valid();
  a.mean = {};
  expect_error([&] { norm_backward(a); }, "mean", ErrorKind::InvalidArgument);
  a = valid();
  a.rstd = stats3;
  expect_error([&] { norm_backward(a); }, "rstd", ErrorKind::InvalidArgument);
  a = valid();
  a.kind = NormKind::RmsNorm;  // RMSNorm has no mean
  expect_error([&] { norm_backward(a); }, "mean", ErrorKind::InvalidArgument);
  a = valid();
  a.dweight = dw;  // no workspace
  expect_error([&] { norm_backward(a); }, "workspace", ErrorKind::InvalidArgument);
  a.workspace = tiny_workspace;
  expect_error([&] { norm_backward(a); }, "workspace bytes", ErrorKind::InvalidArgument);
  a.workspace = workspace;
  EXPECT_NO_THROW(norm_backward(a));
  // A row too long for any layout is Unsupported, naming the limit.
  DeviceTensor long_x(DType::F32, {1, 262144}), long_dx(DType::F32, {1, 262144}), one(DType::F32, {1});
  a = valid();
  a.x = long_x;
  a.dy = long_x;
  a.dx = long_dx;
  a.mean = one;
  a.rstd = one;
  expect_error([&] { norm_backward(a); }, "row length", ErrorKind::Unsupported);
}

}  // namespace
}  // namespace fusekit
