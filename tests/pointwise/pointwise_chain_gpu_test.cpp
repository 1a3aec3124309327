// The pointwise chain kernel against the CPU reference of the same epilogue description
// (reference::apply_epilogue), in every dtype, on the vector path (aligned rows of whole 16-byte
// chunks) and the element-by-element one (odd lengths, odd row strides, odd gate blocks), with
// column-distinct biases and scales and row-distinct scales so no index mix-up can pass; the
// chains compiled into the kernel are among them.
#include "fusekit/pointwise_chain.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/epilogue.hpp"
#include "fusekit/transfer.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;
using testing::to_matrix;

struct Shape {
  std::int64_t rows, cols, ld;  // x's row stride ld >= cols
  std::int64_t y_pad = 0;       // y's row stride: its columns + y_pad
  float magnitude = 3.0f;       // x uniform in [-magnitude, magnitude]
};

// A row-major [rows, cols] view over its own storage with row stride ld.
struct Strided {
  DeviceBuffer buffer;
  TensorView view;
  Strided(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld)
      : buffer(static_cast<std::size_t>(rows * ld) * dtype_size(dtype)),
        view(TensorView::matrix(buffer.data(), dtype, rows, cols, ld)) {}
};

// e4m3 keeps 3 mantissa bits: a result off by one code near a rounding tie moves it by 2^-3.
constexpr double kE4m3Tolerance = 0.0625;

// How far from a rounding tie, relative to the value, float's pre-cast value may be from double's:
// about 170 float ulps, and under 1/190 of bf16's half ulp, so a kernel off by 1e-4 (a wrong
// activation form) still lands outside it.
constexpr double kTieWindow = 1e-5;

// A chain whose last node casts to a format narrower than y's (f32 y, a bf16 cast) rounds once at
// its end. Where float and double fall on either side of a rounding tie, y holds the other
// neighbouring code. Returns `want` with that code put in at exactly those elements: y differs
// from `want` there, the double pre-cast value lies within kTieWindow of the midpoint of the two
// codes, and the two sit on either side of it. Every other element keeps the full check.
std::vector<double> accept_rounding_ties(const EpilogueSpec& chain, DType dt, const std::vector<double>& got,
                                         std::vector<double> want, const reference::Matrix& x,
                                         const reference::EpilogueInputs& in) {
  if (chain.nodes.empty()) return want;
  const EpilogueNode& last = chain.nodes.back();
  const bool narrowing_cast = last.op == EpilogueOp::Cast && last.dtype != DType::E4M3 &&
                              dtype_size(last.dtype) < dtype_size(dt);
  if (!narrowing_cast) return want;
  EpilogueSpec before_cast = chain;
  before_cast.nodes.pop_back();
  const std::vector<double> pre = reference::apply_epilogue(before_cast, x, in).out.data;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double to_want = want[i] - pre[i], to_got = got[i] - pre[i];
    const bool either_side = to_want * to_got < 0.0;  // so got differs from want
    if (either_side && std::abs(to_want + to_got) <= kTieWindow * std::abs(pre[i])) {
      want[i] = got[i];
    }
  }
  return want;
}

struct Case {
  std::string name;
  EpilogueSpec chain;
};

// Runs `chain` on x [rows, cols] (row stride ld) with every tensor it needs, and compares y (and
// aux, amax) with the reference.
void check_chain(DType dt, const EpilogueSpec& chain, const Shape& s, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << chain.to_string() << " " << s.rows << "x" << s.cols << " ld " << s.ld);
  const std::int64_t m = s.rows, n = s.cols, n_out = epilogue_output_columns(chain, n);
  const bool quantized = chain.uses(EpilogueOp::QuantizeE4M3);
  Strided x(dt, m, n, s.ld);
  Strided y(quantized ? DType::E4M3 : dt, m, n_out, n_out + s.y_pad);
  fill_uniform(x.view, seed, -s.magnitude, s.magnitude);
  poison(y.view);

  PointwiseChainArgs a{chain, x.view, {}, y.view};
  reference::EpilogueInputs in;
  DeviceTensor source(dt, {m, n}), bias(dt, {n}), residual(dt, {m, n_out}), row_scale(DType::F32, {m}),
      col_scale(DType::F32, {n}), aux(dt, {m, n}), quant(DType::F32, {1}), amax(DType::F32, {1});
  if (chain.uses(EpilogueOp::AddSource)) {
    fill_uniform(source, seed + 1, -1.0f, 1.0f);
    a.tensors.source = source;
    in.source = to_matrix(source);
  }
  if (chain.uses(EpilogueOp::ColumnBias)) {
    fill_uniform(bias, seed + 2, -2.0f, 2.0f);
    a.tensors.bias = bias;
    in.bias = download(bias);
  }
  if (chain.uses(EpilogueOp::Residual)) {
    fill_uniform(residual, seed + 3, -1.0f, 1.0f);
    a.tensors.residual = residual;
    in.residual = to_matrix(residual);
  }
  if (chain.uses(EpilogueOp::RowScale)) {
    fill_uniform(row_scale, seed + 4, 0.25f, 4.0f);
    a.tensors.row_scale = row_scale;
    in.row_scale = download(row_scale);
  }
  if (chain.uses(EpilogueOp::ColumnScale)) {
    fill_uniform(col_scale, seed + 5, -2.0f, 2.0f);
    a.tensors.col_scale = col_scale;
    in.col_scale = download(col_scale);
  }
  if (chain.uses(EpilogueOp::StoreAux)) {
    poison(aux);
    a.tensors.aux = aux;
  }
  constexpr double kQuantScale = 16.0;
  if (quantized) {
    upload(std::vector<double>{kQuantScale}, quant);
    upload(std::vector<double>{0.0}, amax);
    a.tensors.quant_scale = static_cast<const float*>(quant.data());
    a.tensors.amax = static_cast<float*>(amax.data());
    in.quant_scale = kQuantScale;
  }
  pointwise_chain(a);

  const auto want = reference::apply_epilogue(chain, to_matrix(x.view), in);
  // A chain whose values pass through e4m3 (quantized, or cast to it mid-chain) lands on a
  // neighbouring code wherever float and double differ across a rounding tie.
  const bool e4m3_values =
      quantized || std::any_of(chain.nodes.begin(), chain.nodes.end(), [](const EpilogueNode& node) {
        return node.op == EpilogueOp::Cast && node.dtype == DType::E4M3;
      });
  const double bound = e4m3_values ? kE4m3Tolerance : bench::tolerance(dt);
  const std::vector<double> got = download(y.view);
  EXPECT_LE(rel_l2(got, accept_rounding_ties(chain, dt, got, want.out.data, to_matrix(x.view), in)), bound);
  if (chain.uses(EpilogueOp::StoreAux)) {
    EXPECT_LE(rel_l2(download(aux), want.aux.data), bench::tolerance(dt));
  }
  if (quantized) {
    const double got = download(amax)[0];
    EXPECT_NEAR(got, want.amax, 1e-5 * want.amax);
  }
}

class PointwiseChainGpu : public ::testing::TestWithParam<DType> {};

TEST_P(PointwiseChainGpu, MatchesTheReference) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  // The first three are compiled into the kernel on the vector path (device::CompiledChains),
  // interpreted on the element-by-element one.
  const std::vector<Case> ungated = {
      {"ladder", EpilogueSpec{}.bias().gelu_tanh().residual()},
      {"mlp", EpilogueSpec{}.bias().gelu_tanh()},
      {"projection", EpilogueSpec{}.bias().residual()},
      {"scales", EpilogueSpec{}.scale(0.5f).row_scale().column_scale().silu().clamp(-1.0f, 2.0f)},
      {"source", EpilogueSpec{}.add_source(0.7f).relu().store_aux().gelu_erf().cast(DType::BF16)},
      {"quantize", EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3()},
  };
  // Aligned rows of whole chunks (vector path), padded aligned rows, odd lengths and strides.
  const Shape shapes[] = {{64, 256, 256}, {33, 256, 264}, {37, 130, 130}, {5, 64, 67}};
  for (const Shape& s : shapes)
    for (std::size_t c = 0; c < ungated.size(); ++c) check_chain(dt, ungated[c].chain, s, seed + 16 * c);
  // Gated: blocks of 32 (whole chunks) and of 3 (element by element).
  check_chain(dt, EpilogueSpec{}.bias().swiglu(32).residual(), {48, 256, 256}, seed + 100);
  check_chain(dt, EpilogueSpec{}.column_scale().geglu(32).scale(2.0f), {7, 128, 136}, seed + 101);
  check_chain(dt, EpilogueSpec{}.bias().swiglu(3), {9, 18, 18}, seed + 102);
}

// Rows up to issue 4's longest (262144), odd lengths past a CTA (131071), many rows, y's rows
// padded, and inputs large enough to reach the activations' saturated ends (GELU's tanh, SiLU's
// exponential) and the casts' ranges (f16 to 65504, e4m3 saturating at 448).
TEST_P(PointwiseChainGpu, LongRowsPaddedOutputsAndLargeInputs) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  const std::vector<Case> chains = {
      {"ladder", EpilogueSpec{}.bias().gelu_tanh().residual()},
      {"silu_cast", EpilogueSpec{}.row_scale().silu().cast(DType::F16).cast(DType::E4M3)},
      {"quantize", EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3()},
  };
  // NOTE: 1e4 · row scales up to 4 stays inside f16 (65504) for the mid-chain cast.
  constexpr float kMagnitude = 1e4f;
  const Shape shapes[] = {{3, 262144, 262152, 8}, {2, 131071, 131075, 5}, {4097, 4096, 4104, 8},
                          {64, 1024, 1024, 0, kMagnitude}};
  for (const Shape& s : shapes)
    for (std::size_t c = 0; c < chains.size(); ++c) check_chain(dt, chains[c].chain, s, seed + 16 * c);
}

// A NaN in x makes the amax NaN (device/amax.cuh: fmaxf dropped it, and the amax said the largest
// finite value), on the compiled vector path (aligned rows) and the element-by-element one (odd
// rows); every other element of y still matches the reference.
TEST_P(PointwiseChainGpu, ANaNReachesTheAmax) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  const EpilogueSpec chain = EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3();
  constexpr double kQuantScale = 16.0;
  for (const Shape& s : {Shape{64, 256, 256}, Shape{37, 130, 130}}) {
    const std::size_t nan_at = seed % static_cast<std::size_t>(s.rows * s.cols);
    SCOPED_TRACE(::testing::Message() << s.rows << "x" << s.cols << ", NaN at element " << nan_at);
    Strided x(dt, s.rows, s.cols, s.ld), y(DType::E4M3, s.rows, s.cols, s.cols);
    DeviceTensor bias(dt, {s.cols}), quant(DType::F32, {1}), amax(DType::F32, {1});
    fill_uniform(x.view, seed, -s.magnitude, s.magnitude);
    fill_uniform(bias, seed + 1, -2.0f, 2.0f);
    auto host_x = download(x.view);
    host_x[nan_at] = std::numeric_limits<double>::quiet_NaN();
    upload(host_x, x.view);
    upload(std::vector<double>{kQuantScale}, quant);
    upload(std::vector<double>{0.0}, amax);
    poison(y.view);
    PointwiseChainArgs a{chain, x.view, {}, y.view};
    a.tensors.bias = bias;
    a.tensors.quant_scale = static_cast<const float*>(quant.data());
    a.tensors.amax = static_cast<float*>(amax.data());
    pointwise_chain(a);

    reference::EpilogueInputs in;
    in.bias = download(bias);
    in.quant_scale = kQuantScale;
    const auto want = reference::apply_epilogue(chain, to_matrix(x.view), in);
    EXPECT_TRUE(std::isnan(want.amax)) << "the reference keeps the NaN too";
    EXPECT_TRUE(std::isnan(download(amax)[0])) << "amax " << download(amax)[0];
    auto got = download(y.view);
    auto rest = want.out.data;
    got.erase(got.begin() + static_cast<std::ptrdiff_t>(nan_at));
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(nan_at));
    EXPECT_LE(rel_l2(got, rest), kE4m3Tolerance) << "the other elements";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PointwiseChainGpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(PointwiseChainGpu, RejectsBadArgumentsBeforeLaunch) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor x(DType::BF16, {4, 64}), y(DType::BF16, {4, 64}), y_half(DType::BF16, {4, 32}),
      y_f16(DType::F16, {4, 64}), bias_f16(DType::F16, {64});
  EXPECT_THROW(pointwise_chain({EpilogueSpec{}.bias(), x, {}, y}), Error);  // bias node, no bias
  PointwiseChainArgs wrong_bias{EpilogueSpec{}.bias(), x, {}, y};
  wrong_bias.tensors.bias = bias_f16;
  EXPECT_THROW(pointwise_chain(wrong_bias), Error);                               // bias dtype
  EXPECT_THROW(pointwise_chain({EpilogueSpec{}.relu(), x, {}, y_f16}), Error);    // y dtype
  EXPECT_THROW(pointwise_chain({EpilogueSpec{}.swiglu(32), x, {}, y}), Error);    // y is not halved
  EXPECT_NO_THROW(pointwise_chain({EpilogueSpec{}.swiglu(32), x, {}, y_half}));
  EXPECT_THROW(pointwise_chain({EpilogueSpec{}.quantize_e4m3(), x, {}, y}), Error);  // y not e4m3
}

}  // namespace
}  // namespace fusekit
