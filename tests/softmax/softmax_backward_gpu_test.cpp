// The fused softmax backward against the double CPU reference: f32/f16/bf16, every row layout
// (warp rows, CTA rows, cluster-split rows), odd lengths, padded row strides, scales of either
// sign, y from the fused forward with −∞ entries, fully masked rows (dx exactly 0) and causal
// masks; batched with dx aliasing dy; and the argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/error.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/softmax.hpp"
#include "fusekit/softmax.hpp"
#include "fusekit/softmax_backward.hpp"
#include "fusekit/transfer.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/rows.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;
using testing::to_matrix;

using Shape = testing::RowShape;
using Padded = testing::PaddedRows;

// Row lengths that take every kind of layout (device::plan_rows, two tensors held; bf16):
// sub-warp groups with many rows per CTA, a warp, 64 and 96 threads, full CTAs; rows split over
// clusters (vector access, sm_90) on persistent clusters of 2 two-chunk CTAs and of 2–16
// four-chunk CTAs (full and not; f32 6144 takes the two-chunk clusters), many rows giving each cluster a block of rows to loop over (203
// and 301: odd counts, a last block shorter than the others); odd lengths and padded row strides
// (aligned and not) are read by chunks shifted to each row's phase, also clustered (40001).
constexpr Shape kShapes[] = {{5, 8, 8},          {67, 128, 128},     {33, 200, 203},    {64, 1024, 1024},
                             {37, 1000, 1000},   {33, 2048, 2048},   {16, 4096, 4104},  {9, 3001, 3001},
                             {4, 16384, 16384},  {3, 12347, 12350},  {3, 40000, 40000}, {2, 40001, 40008},
                             {2, 65536, 65536},  {2, 131071, 131072}, {2, 131072, 131072}, {2, 262144, 262144},
                             {33, 6144, 6144},   {203, 16384, 16384}, {301, 32768, 32768}};

// Vector rows split over clusters of more than two two-chunk CTAs, or too long for them, take
// four-chunk CTAs in clusters of up to 16 (sm_90).
bool supported(DType dt, const Shape& s, std::int64_t offset = 0,
               testing::RowPhases phases = testing::RowPhases::Same) {
  if (current_device_info().cc_major >= 9)
    return testing::holds_phased_row<device::TwoTensorRows, device::WideClusterRows>(dt, s, offset, phases);
  return testing::holds_phased_row<device::TwoTensorRows>(dt, s, offset, phases);
}

using testing::random_logits;

class SoftmaxBackwardGpu : public ::testing::TestWithParam<DType> {};

TEST_P(SoftmaxBackwardGpu, MatchesReferenceOnEveryLayout) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Variant {
    double magnitude;
    float scale;
    Causal causal;
  };
  constexpr Variant kVariants[] = {{4.0, 1.0f, Causal::No}, {4.0, 0.125f, Causal::Yes}, {2.0, -0.5f, Causal::No}};
  for (const Shape& s : kShapes) {
    if (!supported(dt, s)) continue;
    for (std::size_t vi = 0; vi < std::size(kVariants); ++vi) {
      const Variant v = kVariants[vi];
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " scale " << v.scale
                                        << (v.causal == Causal::Yes ? " causal" : ""));
      Padded x(dt, s), y(dt, s), dy(dt, s), dx(dt, s);
      upload(random_logits(s.rows, s.n, v.magnitude, seed + vi), x.view);
      softmax_forward({x.view, y.view, v.scale, v.causal});
      fill_uniform(dy.view, seed + 10 + vi, -1.0f, 1.0f);
      poison(dx.view);
      softmax_backward({y.view, dy.view, dx.view, v.scale});
      auto want = reference::softmax_backward(to_matrix(dy.view), to_matrix(y.view), v.scale);
      // NOTE: compared with the exact result rounded to the output dtype: dx ~ y/n of a long row is
      // an f16 subnormal (below 6.1e-5), whose few mantissa bits no kernel can beat.
      for (auto& w : want.data) w = round_to(dt, w);
      const auto got = download(dx.view);
      EXPECT_LE(rel_l2(got, want.data), bench::tolerance(dt));
      // The fully −∞ row (y all 0) has dx exactly 0.
      for (std::int64_t j = 0; j < s.n; ++j) ASSERT_EQ(got[static_cast<std::size_t>(s.n + j)], 0.0) << "column " << j;
    }
  }
}

// [batch, rows, n] with padded row and batch strides; dx written over dy. Rows of one CTA, and
// rows split over a cluster (vector access) whose blocks of rows cross batches.
TEST_P(SoftmaxBackwardGpu, BatchedInPlace) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Batched {
    std::int64_t batch, rows, n, ld;
  };
  constexpr Batched kCases[] = {{3, 40, 520, 528}, {3, 7, 16384, 16392}};
  for (const Batched& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.rows << "x" << c.n);
    const std::int64_t batch_stride = c.rows * c.ld + 8;
    const std::size_t bytes = static_cast<std::size_t>(c.batch * batch_stride) * dtype_size(dt);
    DeviceBuffer xb(bytes), yb(bytes), dyb(bytes);
    const auto x = TensorView::batched(xb.data(), dt, c.batch, c.rows, c.n, c.ld, batch_stride);
    const auto y = TensorView::batched(yb.data(), dt, c.batch, c.rows, c.n, c.ld, batch_stride);
    const auto dy = TensorView::batched(dyb.data(), dt, c.batch, c.rows, c.n, c.ld, batch_stride);
    fill_uniform(x, seed, -5.0f, 5.0f);
    fill_uniform(dy, seed + 1, -1.0f, 1.0f);
    softmax_forward({x, y, 0.5f, Causal::Yes});
    reference::Matrix hy(c.batch * c.rows, c.n), hdy(c.batch * c.rows, c.n);
    hy.data = download(y);
    hdy.data = download(dy);
    softmax_backward({y, dy, dy, 0.5f});
    auto want = reference::softmax_backward(hdy, hy, 0.5);
    for (auto& w : want.data) w = round_to(dt, w);
    EXPECT_LE(rel_l2(download(dy), want.data), bench::tolerance(dt));
  }
}

// Views offset by whole elements. Where y, dy and dx start alike the rows are read by chunks
// shifted to their phase (in place over dy; 131067, odd, on clusters of 16 CTAs for f32), where
// they do not element by element (x, for the forward, starts as y). Nothing around dx is written.
TEST_P(SoftmaxBackwardGpu, OffsetViewsReadShiftedOrElementByElement) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Case {
    Shape shape;
    std::int64_t y_offset, dy_offset, dx_offset;
    bool in_place;  // dx over dy
  };
  constexpr Case kCases[] = {{{16, 4096, 4104}, 1, 1, 1, false}, {{9, 3001, 3001}, 3, 3, 3, true},
                             {{3, 131067, 131067}, 1, 1, 1, false}, {{33, 200, 203}, 1, 1, 0, false},
                             {{2, 40001, 40008}, 0, 3, 0, false}};
  for (std::size_t ci = 0; ci < std::size(kCases); ++ci) {
    const Case c = kCases[ci];
    const Shape& s = c.shape;
    const bool same = c.y_offset == c.dy_offset && (c.in_place || c.dx_offset == c.y_offset);
    if (!supported(dt, s, c.y_offset, same ? testing::RowPhases::Same : testing::RowPhases::Mixed)) continue;
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " offsets " << c.y_offset << ", "
                                      << c.dy_offset << ", " << c.dx_offset << (c.in_place ? " in place" : ""));
    Padded x(dt, s, c.y_offset), y(dt, s, c.y_offset), dy(dt, s, c.dy_offset), dx_own(dt, s, c.dx_offset);
    const Padded& dx = c.in_place ? dy : dx_own;
    poison(dy.storage);
    poison(dx_own.storage);
    upload(random_logits(s.rows, s.n, 4.0, seed + ci), x.view);
    softmax_forward({x.view, y.view});
    fill_uniform(dy.view, seed + 10 + ci, -1.0f, 1.0f);
    auto want = reference::softmax_backward(to_matrix(dy.view), to_matrix(y.view), 1.0);
    for (auto& w : want.data) w = round_to(dt, w);
    softmax_backward({y.view, dy.view, dx.view});
    EXPECT_LE(rel_l2(download(dx.view), want.data), bench::tolerance(dt));
    EXPECT_EQ(dx.written_around(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SoftmaxBackwardGpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(SoftmaxBackwardGpuErrors, RejectsBadArguments) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor y(DType::F16, {4, 64}), dy(DType::F16, {4, 64}), dx(DType::F16, {4, 64}), dx_bf(DType::BF16, {4, 64}),
      dy_long(DType::F16, {4, 65});
  EXPECT_THROW(softmax_backward({y, dy, dx_bf}), Error);
  EXPECT_THROW(softmax_backward({y, dy_long, dx}), Error);
  EXPECT_THROW(softmax_backward({y, dy, dx, std::numeric_limits<float>::infinity()}), Error);
  EXPECT_NO_THROW(softmax_backward({y, dy, dx}));
  // f32 rows hold up to 131072 columns (16 CTAs of 512 threads of four 4-element chunks).
  DeviceTensor long_y(DType::F32, {1, 262144}), long_dx(DType::F32, {1, 262144});
  try {
    softmax_backward({long_y, long_y, long_dx});
    ADD_FAILURE() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

}  // namespace
}  // namespace fusekit
