// The fused softmax forward against the double CPU reference: f32/f16/bf16, every row layout
// (warp rows, CTA rows, cluster-split rows), odd lengths, padded row strides, scales of either
// sign, −∞ entries, fully −∞ rows, causal masks (rows < cols, rows > cols: fully masked rows),
// batched causal, huge and tiny magnitudes, in place, views offset by whole elements; and the
// argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/softmax.hpp"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/softmax.hpp"
#include "fusekit/transfer.hpp"
#include "support/gpu.hpp"
#include "support/rows.hpp"
#include "support/compare.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;

using Shape = testing::RowShape;
using Padded = testing::PaddedRows;

constexpr auto& kShapes = testing::kRowShapes;

// Long rows of whole chunks are staged in shared memory (device::SharedRows) whatever the config.
bool supported(DType dt, const Shape& s, std::int64_t offset = 0,
               testing::RowPhases phases = testing::RowPhases::Same) {
  return testing::holds_phased_row<device::OneTensorRows, device::SharedRows>(dt, s, offset, phases);
}

using testing::random_logits;

class SoftmaxForwardGpu : public ::testing::TestWithParam<DType> {};

TEST_P(SoftmaxForwardGpu, MatchesReferenceOnEveryLayout) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Variant {
    double magnitude;
    float scale;
    Causal causal;
  };
  // NOTE: f16 holds up to 65504, so "huge" is 3e4 for every dtype.
  constexpr Variant kVariants[] = {{4.0, 1.0f, Causal::No},   {4.0, 0.125f, Causal::Yes}, {3e4, 1.0f, Causal::No},
                                   {1e-20, 1.0f, Causal::Yes}, {2.0, -0.5f, Causal::No}};
  for (const Shape& s : kShapes) {
    if (!supported(dt, s)) continue;
    for (std::size_t vi = 0; vi < std::size(kVariants); ++vi) {
      const Variant v = kVariants[vi];
      SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " magnitude " << v.magnitude
                                        << " scale " << v.scale << (v.causal == Causal::Yes ? " causal" : ""));
      Padded x(dt, s), y(dt, s);
      upload(random_logits(s.rows, s.n, v.magnitude, seed + vi), x.view);
      poison(y.view);
      softmax_forward({x.view, y.view, v.scale, v.causal});
      reference::Matrix hx(s.rows, s.n);
      hx.data = download(x.view);
      auto want = reference::softmax_forward(hx, v.scale, v.causal);
      // NOTE: compared with the exact result rounded to the output dtype: probabilities of a long
      // row (1/131071) are f16 subnormals, whose few mantissa bits no kernel can beat.
      for (auto& w : want.data) w = round_to(dt, w);
      const auto got = download(y.view);
      EXPECT_LE(rel_l2(got, want.data), bench::tolerance(dt));
      // The fully −∞ row is exactly zero.
      for (std::int64_t j = 0; j < s.n; ++j) ASSERT_EQ(got[static_cast<std::size_t>(s.n + j)], 0.0) << "column " << j;
    }
  }
}

// Batched [batch, rows, n] with rows > n: the causal mask applies per batch and its first
// rows − n rows of every batch are fully masked (zeros); in place.
TEST_P(SoftmaxForwardGpu, BatchedCausalInPlace) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  constexpr std::int64_t kBatch = 3, kRows = 40, kN = 24, kLd = 32, kBatchStride = kRows * kLd + 8;
  DeviceBuffer buf(static_cast<std::size_t>(kBatch * kBatchStride) * dtype_size(dt));
  const auto x = TensorView::batched(buf.data(), dt, kBatch, kRows, kN, kLd, kBatchStride);
  fill_uniform(x, seed, -5.0f, 5.0f);
  const auto before = download(x);
  softmax_forward({x, x, 0.5f, Causal::Yes});
  const auto got = download(x);
  for (std::int64_t b = 0; b < kBatch; ++b) {
    reference::Matrix m(kRows, kN);
    const auto first = before.begin() + b * kRows * kN;
    m.data.assign(first, first + kRows * kN);
    const auto want = reference::softmax_forward(m, 0.5, Causal::Yes);
    const std::vector<double> got_b(got.begin() + b * kRows * kN, got.begin() + (b + 1) * kRows * kN);
    EXPECT_LE(rel_l2(got_b, want.data), bench::tolerance(dt)) << "batch " << b;
    for (std::int64_t e = 0; e < (kRows - kN) * kN; ++e)
      ASSERT_EQ(got_b[static_cast<std::size_t>(e)], 0.0) << "batch " << b << " element " << e;
  }
}

// Views offset by whole elements. Where x and y start alike the rows are read by chunks shifted
// to their phase (n a multiple of the chunk or not; in place; 262139, odd, on clusters of 16 CTAs
// for f32), where they do not element by element. Nothing around the views is written.
TEST_P(SoftmaxForwardGpu, OffsetViewsReadShiftedOrElementByElement) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Case {
    Shape shape;
    std::int64_t x_offset, y_offset;
    bool in_place;
  };
  constexpr Case kCases[] = {{{16, 4096, 4104}, 1, 1, false}, {{5, 1000, 1000}, 3, 3, false},
                             {{9, 3001, 3001}, 1, 1, true},   {{3, 262139, 262139}, 1, 1, false},
                             {{33, 200, 203}, 1, 0, false},   {{2, 40001, 40008}, 0, 3, false},
                             {{16, 4096, 4104}, 2, 0, false}};
  for (std::size_t ci = 0; ci < std::size(kCases); ++ci) {
    const Case c = kCases[ci];
    const Shape& s = c.shape;
    const auto phases = c.in_place || c.x_offset == c.y_offset ? testing::RowPhases::Same : testing::RowPhases::Mixed;
    if (!supported(dt, s, c.x_offset, phases)) continue;
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.n << " ld " << s.ld << " offsets " << c.x_offset << ", "
                                      << c.y_offset << (c.in_place ? " in place" : ""));
    Padded x(dt, s, c.x_offset), y_own(dt, s, c.y_offset);
    const Padded& y = c.in_place ? x : y_own;
    poison(x.storage);
    poison(y_own.storage);
    upload(random_logits(s.rows, s.n, 4.0, seed + ci), x.view);
    reference::Matrix hx(s.rows, s.n);
    hx.data = download(x.view);
    softmax_forward({x.view, y.view, 1.0f, Causal::No});
    auto want = reference::softmax_forward(hx, 1.0, Causal::No);
    for (auto& w : want.data) w = round_to(dt, w);
    EXPECT_LE(rel_l2(download(y.view), want.data), bench::tolerance(dt));
    EXPECT_EQ(y.written_around(), 0);
  }
  // Mixed phases past the element-by-element kernels' longest row: an error before any launch.
  const Shape too_long{1, 200001, 200001};
  if (!supported(dt, too_long, 1, testing::RowPhases::Mixed)) {
    Padded x(dt, too_long, 1), y(dt, too_long, 0);
    try {
      softmax_forward({x.view, y.view});
      ADD_FAILURE() << "expected an Unsupported error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SoftmaxForwardGpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(SoftmaxForwardGpuErrors, RejectsBadArguments) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor x(DType::F16, {4, 64}), y(DType::F16, {4, 64}), y_bf(DType::BF16, {4, 64}), y_long(DType::F16, {4, 65});
  EXPECT_THROW(softmax_forward({x, y_bf}), Error);
  EXPECT_THROW(softmax_forward({x, y_long}), Error);
  EXPECT_THROW(softmax_forward({x, y, std::numeric_limits<float>::infinity()}), Error);
  EXPECT_NO_THROW(softmax_forward({x, y}));
  // 2 MiB rows: past 16 CTAs of shared memory.
  DeviceTensor long_x(DType::F32, {1, 524288}), long_y(DType::F32, {1, 524288});
  try {
    softmax_forward({long_x, long_y});
    ADD_FAILURE() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

}  // namespace
}  // namespace fusekit
