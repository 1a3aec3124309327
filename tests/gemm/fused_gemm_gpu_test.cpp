// Level 2: fused_gemm on every backend and chain against the CPU double reference, odd shapes
// included (M, N, K not multiples of the 128×256×64 tile; K not a multiple of 64; gated chains
// with N/2 a multiple of their gate block).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/fused_gemm.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/epilogue.hpp"
#include "fusekit/reference/gemm.hpp"
#include "fusekit/transfer.hpp"
#include "support/fake_pointer.hpp"
#include "support/gpu.hpp"
#include "support/compare.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;
using testing::to_matrix;

using reference::Matrix;

struct Shape {
  std::int64_t m, n, k;
  std::int64_t pad = 0;  // elements past each row's last column in D, the residual and aux
};

// Columns [cols, cols + pad) of every row of `rows` (a [M, cols + pad] buffer): still poison.
void expect_padding_untouched(const DeviceTensor& rows, std::int64_t cols, std::int64_t pad, const char* what) {
  if (pad == 0) return;
  const auto got = download(rows);
  const std::int64_t m = rows.view().shape[0], ld = cols + pad;
  std::int64_t written = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = cols; j < ld; ++j) written += !std::isnan(got[static_cast<std::size_t>(i * ld + j)]);
  EXPECT_EQ(written, 0) << what << ": elements written past the last column";
}

// A·Bᵀ in double on the host, B stored [N, K].
Matrix reference_product(const DeviceTensor& a, const DeviceTensor& b) {
  reference::GemmProblem p;
  p.a = to_matrix(a);
  p.b = to_matrix(b);
  p.trans_b = Transpose::Yes;
  return reference::gemm(p).d;
}

// Runs spec on `backend` at `shape` and checks D (and aux) against
// reference::apply_epilogue(A·Bᵀ). Bias, scales, source and residual are dense random tensors:
// column-distinct bias values and row-distinct scales, so a mis-indexed epilogue cannot pass.
void check_chain(FusedGemmHandle& handle, const EpilogueSpec& spec, DType dt, Shape s, GemmBackend backend,
                 std::uint64_t seed, Sm90Schedule schedule = Sm90Schedule::Auto) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " chain " << spec.to_string() << " " << dtype_name(dt)
                                    << " M=" << s.m << " N=" << s.n << " K=" << s.k << " backend "
                                    << gemm_backend_name(backend));
  const std::int64_t n_out = epilogue_output_columns(spec, s.n);
  // The aux store sees the width at its node: N before a gated node, N/2 after.
  std::int64_t aux_cols = s.n;
  for (const auto& node : spec.nodes) {
    if (node.op == EpilogueOp::StoreAux) break;
    if (node.op == EpilogueOp::SwiGlu || node.op == EpilogueOp::GeGlu) aux_cols = s.n / 2;
  }
  DeviceTensor a(dt, {s.m, s.k}), b(dt, {s.n, s.k}), d_rows(dt, {s.m, n_out + s.pad}), bias(dt, {s.n});
  DeviceTensor res_rows(dt, {s.m, n_out + s.pad}), aux_rows(dt, {s.m, aux_cols + s.pad});
  DeviceTensor src(dt, {s.m, s.n}), rs(DType::F32, {s.m}), cs(DType::F32, {s.n});
  const auto padded = [&](const DeviceTensor& rows, std::int64_t cols) {
    return TensorView::matrix(rows.data(), dt, s.m, cols, cols + s.pad);
  };
  const TensorView d = padded(d_rows, n_out), res = padded(res_rows, n_out), aux = padded(aux_rows, aux_cols);
  const float w = std::sqrt(3.0f / static_cast<float>(s.k));
  fill_uniform(a, seed, -1, 1);
  fill_uniform(b, seed + 1, -w, w);
  fill_uniform(bias, seed + 2, -2, 2);
  fill_uniform(res_rows, seed + 3, -1, 1);
  fill_uniform(src, seed + 4, -1, 1);
  fill_uniform(rs, seed + 5, 0.25f, 2.0f);
  fill_uniform(cs, seed + 6, -2.0f, 2.0f);
  poison(d_rows);
  poison(aux_rows);
  FusedGemmArgs g{a, b, d, spec, {}, schedule};
  if (spec.uses(EpilogueOp::ColumnBias)) g.tensors.bias = bias;
  if (spec.uses(EpilogueOp::Residual)) g.tensors.residual = res;
  if (spec.uses(EpilogueOp::AddSource)) g.tensors.source = src;
  if (spec.uses(EpilogueOp::RowScale)) g.tensors.row_scale = rs;
  if (spec.uses(EpilogueOp::ColumnScale)) g.tensors.col_scale = cs;
  if (spec.uses(EpilogueOp::StoreAux)) g.tensors.aux = aux;
  const auto report = fused_gemm(handle, g, backend);
  EXPECT_EQ(report.backend, backend);

  const Matrix acc = reference_product(a, b);
  reference::EpilogueInputs in;
  in.bias = download(bias);
  in.residual = to_matrix(res);
  in.source = to_matrix(src);
  in.row_scale = download(rs);
  in.col_scale = download(cs);
  const auto want = reference::apply_epilogue(spec, acc, in);
  EXPECT_LE(rel_l2(download(d), want.out.data), bench::tolerance(dt)) << "D";
  if (spec.uses(EpilogueOp::StoreAux)) {
    EXPECT_LE(rel_l2(download(aux), want.aux.data), bench::tolerance(dt)) << "aux";
    expect_padding_untouched(aux_rows, aux_cols, s.pad, "aux");
  }
  expect_padding_untouched(d_rows, n_out, s.pad, "D");
}

class FusedGemmPortable : public ::testing::TestWithParam<DType> {};

// Every epilogue node, and the combinations the ladders use, on odd shapes.
TEST_P(FusedGemmPortable, EveryNodeMatchesReference) {
  FUSEKIT_REQUIRE_GPU();
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const EpilogueSpec plain[] = {
      EpilogueSpec{},
      EpilogueSpec{}.scale(0.5f).add_source(0.75f),
      EpilogueSpec{}.bias().gelu_tanh(),
      EpilogueSpec{}.bias().gelu_tanh().residual(),
      EpilogueSpec{}.bias().gelu_erf().residual(),
      EpilogueSpec{}.row_scale().column_scale().relu(),
      EpilogueSpec{}.bias().store_aux().silu().clamp(-0.5f, 2.0f),
      EpilogueSpec{}.scale(3.0f).cast(DType::E4M3).relu(),
  };
  // Gate blocks inside half the 128-column tile (64, 32): N need not fill the last tile.
  const EpilogueSpec gated_small[] = {
      EpilogueSpec{}.swiglu(64),
      EpilogueSpec{}.bias().swiglu(64).residual(),
      EpilogueSpec{}.column_scale().geglu(32).store_aux().row_scale(),
  };
  // Blocks that are multiples of it (the Hopper kernel's 128, and 256): a tile's gate and up
  // rows of B are then a block apart, and column-indexed nodes before the gate must follow them.
  const EpilogueSpec gated_large[] = {
      EpilogueSpec{}.swiglu(kSm90GateBlock),
      EpilogueSpec{}.bias().swiglu(kSm90GateBlock).residual(),
      EpilogueSpec{}.column_scale().geglu(256).store_aux().row_scale(),
  };
  // 2100×2056×328: 17×17 tiles, more than one wave of CTAs; 6 k-tiles, the 3-stage pipeline wraps.
  const Shape plain_shapes[] = {{256, 256, 64}, {333, 520, 200}, {1000, 136, 72}, {7, 8, 8}, {2100, 2056, 328}};
  const Shape gated_small_shapes[] = {{256, 256, 64}, {333, 384, 200}, {129, 128, 8}};
  const Shape gated_large_shapes[] = {{256, 512, 64}, {333, 1536, 200}, {129, 512, 8}};  // 2·256 divides N
  int i = 0;
  for (const auto& spec : plain)
    for (const auto& s : plain_shapes) check_chain(handle, spec, GetParam(), s, GemmBackend::Portable, seed + 16 * i++);
  for (const auto& spec : gated_small)
    for (const auto& s : gated_small_shapes)
      check_chain(handle, spec, GetParam(), s, GemmBackend::Portable, seed + 16 * i++);
  for (const auto& spec : gated_large)
    for (const auto& s : gated_large_shapes)
      check_chain(handle, spec, GetParam(), s, GemmBackend::Portable, seed + 16 * i++);
}

// Outputs narrower than a 16-byte chunk at the right edge (rows padded to one: N odd), and a
// gate block narrower than a chunk: the epilogue's value-by-value edge path, which must write
// nothing past the last column.
TEST_P(FusedGemmPortable, EdgeChunksAndNarrowGateBlocksMatchReference) {
  FUSEKIT_REQUIRE_GPU();
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  constexpr std::int64_t kNarrowBlock = 4;  // half a chunk of 16-bit outputs
  const EpilogueSpec plain = EpilogueSpec{}.bias().store_aux().gelu_tanh().residual();
  const EpilogueSpec gated = EpilogueSpec{}.bias().swiglu(kNarrowBlock).residual();
  // Rows of 520 and 136 elements; gated: 332 outputs in rows of 336, then unpadded.
  check_chain(handle, plain, GetParam(), {333, 517, 72, 3}, GemmBackend::Portable, seed);
  check_chain(handle, plain, GetParam(), {130, 131, 40, 5}, GemmBackend::Portable, seed + 16);
  check_chain(handle, gated, GetParam(), {200, 664, 64, 4}, GemmBackend::Portable, seed + 32);
  check_chain(handle, gated, GetParam(), {129, 256, 8, 0}, GemmBackend::Portable, seed + 48);
}

// The e4m3 value just below and just above v: a result computed in float on the GPU and in
// double on the host may round to either neighbour of the reference's code when it lies near a
// tie, and to nothing farther (saturation at ±448 included).
double e4m3_step(double v) {
  constexpr double kMinNormal = 1.0 / 64, kSubnormalStep = 1.0 / 512, kMantissaSteps = 8;
  const double a = std::abs(v);
  if (a < kMinNormal) return kSubnormalStep;
  return std::exp2(std::floor(std::log2(a))) / kMantissaSteps;
}

// A chain ending in quantize_e4m3: D = e4m3(chain(A·Bᵀ)·quant_scale) in rows of `ld` bytes and
// amax = max |chain(A·Bᵀ)| over the matrix, on `backend`. quant_scale makes the largest
// outputs saturate at 448, so the saturating conversion is checked too. Every element of D
// must be the reference's code or a neighbour of it (no bound over the whole matrix, which a
// few wrong elements could pass); rows past M must not reach amax, which holds to the GELU's
// hardware tanh on 16-bit inputs (tanh.approx, about 2^-11: kAmaxTolerance).
// Operands: Random, or NegativeProducts (A in [-1, -1/2], B in [w/4, w/2]: every product
// negative, about -1.4 at K = 8, so that after bias → relu the rows past M, whose staged products
// are 0, would hold the largest values if they reached amax).
enum class Operands : std::uint8_t { Random, NegativeProducts };

void check_quantized_chain(FusedGemmHandle& handle, const EpilogueSpec& spec, DType dt, Shape s, std::int64_t ld,
                           GemmBackend backend, std::uint64_t seed, Operands operands = Operands::Random) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " chain " << spec.to_string() << " " << dtype_name(dt)
                                    << " M=" << s.m << " N=" << s.n << " K=" << s.k << " ld " << ld);
  const std::int64_t n_out = epilogue_output_columns(spec, s.n);
  DeviceTensor a(dt, {s.m, s.k}), b(dt, {s.n, s.k}), d_rows(DType::E4M3, {s.m, ld}), bias(dt, {s.n});
  // The residual's rows padded to 16 bytes, as the portable kernel reads them (N odd included).
  constexpr std::int64_t kRowChunk = 8;
  const std::int64_t res_ld = (n_out + kRowChunk - 1) / kRowChunk * kRowChunk;
  DeviceTensor res_rows(dt, {s.m, res_ld}), rs(DType::F32, {s.m}), scale(DType::F32, {1}), amax(DType::F32, {1});
  const TensorView res = TensorView::matrix(res_rows.data(), dt, s.m, n_out, res_ld);
  const float w = std::sqrt(3.0f / static_cast<float>(s.k));
  const bool negative = operands == Operands::NegativeProducts;
  fill_uniform(a, seed, -1, negative ? -0.5f : 1.0f);
  fill_uniform(b, seed + 1, negative ? w / 4 : -w, negative ? w / 2 : w);
  fill_uniform(bias, seed + 2, -2, 2);
  fill_uniform(res_rows, seed + 3, -1, 1);
  fill_uniform(rs, seed + 4, 0.25f, 2.0f);
  poison(d_rows);
  reference::EpilogueInputs in;
  in.bias = download(bias);
  in.residual = to_matrix(res);
  in.row_scale = download(rs);
  const Matrix acc = reference_product(a, b);
  // quant_scale from the reference's amax: |x| above 3/4 of it saturates.
  EpilogueSpec unscaled = spec;
  unscaled.nodes.pop_back();
  const auto before = reference::apply_epilogue(unscaled, acc, in);
  double want_amax = 0;
  for (double v : before.out.data) want_amax = std::max(want_amax, std::abs(v));
  ASSERT_GT(want_amax, 0.0);
  in.quant_scale = static_cast<float>(448.0 / (0.75 * want_amax));
  upload(std::vector<double>{in.quant_scale}, scale);
  upload(std::vector<double>{0.0}, amax);

  const TensorView d = TensorView::matrix(d_rows.data(), DType::E4M3, s.m, n_out, ld);
  FusedGemmArgs g{a, b, d, spec, {}};
  if (spec.uses(EpilogueOp::ColumnBias)) g.tensors.bias = bias;
  if (spec.uses(EpilogueOp::Residual)) g.tensors.residual = res;
  if (spec.uses(EpilogueOp::RowScale)) g.tensors.row_scale = rs;
  g.tensors.quant_scale = static_cast<const float*>(scale.data());
  g.tensors.amax = static_cast<float*>(amax.data());
  EXPECT_EQ(fused_gemm(handle, g, backend).backend, backend == GemmBackend::Auto ? GemmBackend::Portable : backend);

  const auto want = reference::apply_epilogue(spec, acc, in);
  const auto got = download(d);
  ASSERT_EQ(got.size(), want.out.data.size());
  std::int64_t off = 0, saturated = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double v = want.out.data[i];
    off += !(std::abs(got[i] - v) <= e4m3_step(v));  // NaN counts as off
    saturated += std::abs(v) == 448.0;
  }
  EXPECT_EQ(off, 0) << "elements farther than one e4m3 step from the reference";
  EXPECT_GT(saturated, 0) << "no output reached the saturation the scale was chosen for";
  constexpr double kAmaxTolerance = 1e-3;
  EXPECT_NEAR(download(amax)[0], want_amax, kAmaxTolerance * want_amax) << "amax";
  expect_padding_untouched(d_rows, n_out, ld - n_out, "D");
}

// D in e4m3 after a final quantize_e4m3 node, with its amax, on the portable kernel (which Auto
// picks for the gated chain: cuBLASLt and the Hopper kernels have no gated quantize): whole chunks
// and the right edge (N, or N/2 gated, not a multiple of 8), rows past the last tile's M, gate
// blocks of 64 and 128.
TEST_P(FusedGemmPortable, QuantizedChainsMatchReference) {
  FUSEKIT_REQUIRE_GPU();
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const DType dt = GetParam();
  const EpilogueSpec plain[] = {EpilogueSpec{}.quantize_e4m3(), EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3(),
                                EpilogueSpec{}.row_scale().residual().quantize_e4m3()};
  struct Case {
    Shape shape;
    std::int64_t ld;  // D's row stride in bytes: a multiple of 8 (one chunk of e4m3 outputs)
  };
  const Case plain_cases[] = {{{333, 520, 200}, 520}, {{130, 131, 40}, 136}, {{7, 8, 8}, 8}};
  int i = 0;
  for (const auto& spec : plain)
    for (const auto& c : plain_cases)
      check_quantized_chain(handle, spec, dt, c.shape, c.ld, GemmBackend::Portable, seed + 16 * i++);
  check_quantized_chain(handle, EpilogueSpec{}.bias().swiglu(64).quantize_e4m3(), dt, {333, 384, 200}, 192,
                        GemmBackend::Portable, seed + 16 * i++);
  check_quantized_chain(handle, EpilogueSpec{}.swiglu(kSm90GateBlock).quantize_e4m3(), dt, {129, 512, 72}, 256,
                        GemmBackend::Auto, seed + 16 * i++);
  // 126 rows past M in the last row of tiles, each relu(bias) up to 2 against about 1 inside.
  check_quantized_chain(handle, EpilogueSpec{}.bias().relu().quantize_e4m3(), dt, {130, 136, 8}, 136,
                        GemmBackend::Portable, seed + 16 * i++, Operands::NegativeProducts);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedGemmPortable, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The Hopper kernel's tests: skipped (visibly) without a GPU, or on one that is not sm_90.
class FusedGemmSm90 : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    FUSEKIT_REQUIRE_GPU();
    if (current_device_info().cc_major != 9) GTEST_SKIP() << "the Hopper kernel needs sm_90";
  }
};

TEST_P(FusedGemmSm90, EveryCompiledChainMatchesReference) {
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const EpilogueSpec chains[] = {EpilogueSpec{}, EpilogueSpec{}.bias().gelu_tanh(),
                                 EpilogueSpec{}.bias().gelu_tanh().residual()};
  // 2100×2056×328: 17×9 tiles of 128×256 (17×17 of 128×128), more than the 132 SMs, so the
  // persistent scheduler hands CTAs a second tile; 6 k-blocks wrap the 4-stage pipeline. Rows
  // padded by 8 elements (16 bytes, TMA's alignment): D's and R's strides are their own.
  const Shape shapes[] = {{256, 512, 128}, {333, 520, 200}, {1000, 136, 72}, {7, 8, 8}, {2100, 2056, 328},
                          {333, 520, 200, 8}};
  int i = 0;
  for (auto schedule : {Sm90Schedule::Cooperative, Sm90Schedule::Pingpong, Sm90Schedule::Deferred})
    for (const auto& spec : chains)
      for (const auto& s : shapes)
        if (schedule != Sm90Schedule::Deferred || spec != EpilogueSpec{})  // Deferred: the bias → GELU chains
          check_chain(handle, spec, GetParam(), s, GemmBackend::Sm90, seed + 8 * i++, schedule);
}

// The deferred-epilogue kernel hands each tile to the epilogue warps through one shared-memory
// buffer guarded by barriers whose phases flip every tile: 32×16 tiles of 128×256 are ~4 per
// CTA on 132 SMs, so a wrong phase (a tile read before it is written, or overwritten before it
// is stored) shows in D. K = 64 is one k-block: the epilogue warps have the least time per tile.
TEST_P(FusedGemmSm90, DeferredEpilogueOverManyTilesPerCtaMatchesReference) {
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  int i = 0;
  for (const auto& spec : {EpilogueSpec{}.bias().gelu_tanh(), EpilogueSpec{}.bias().gelu_tanh().residual()})
    for (const Shape& s : {Shape{4000, 4096, 64}, Shape{4000, 4096, 520, 8}})
      check_chain(handle, spec, GetParam(), s, GemmBackend::Sm90, seed + 8 * i++, Sm90Schedule::Deferred);
}

// In place: D is R's own view (a pre-norm block's residual stream updated where it lies).
// Cooperative and Pingpong read R through the epilogue's source stages, a subtile at a time;
// Deferred's epilogue warps read it a 16-byte chunk at a time: each must read every element of R
// before a store of D overwrites it.
TEST_P(FusedGemmSm90, ResidualInPlaceMatchesReference) {
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const DType dt = GetParam();
  const EpilogueSpec spec = EpilogueSpec{}.bias().gelu_tanh().residual();
  const Shape shapes[] = {{333, 520, 200, 8}, {2100, 2056, 328}};
  int i = 0;
  for (auto schedule : {Sm90Schedule::Cooperative, Sm90Schedule::Pingpong, Sm90Schedule::Deferred})
    for (const Shape& s : shapes) {
      const std::uint64_t case_seed = seed + 8 * i++;
      SCOPED_TRACE(::testing::Message() << "seed " << case_seed << " " << dtype_name(dt) << " M=" << s.m
                                        << " N=" << s.n << " K=" << s.k << " pad " << s.pad << " schedule "
                                        << static_cast<int>(schedule));
      DeviceTensor a(dt, {s.m, s.k}), b(dt, {s.n, s.k}), bias(dt, {s.n}), rows(dt, {s.m, s.n + s.pad});
      const TensorView y = TensorView::matrix(rows.data(), dt, s.m, s.n, s.n + s.pad);
      fill_uniform(a, case_seed, -1, 1);
      fill_uniform(b, case_seed + 1, -std::sqrt(3.0f / s.k), std::sqrt(3.0f / s.k));
      fill_uniform(bias, case_seed + 2, -2, 2);
      fill_uniform(rows, case_seed + 3, -1, 1);
      reference::EpilogueInputs in;
      in.bias = download(bias);
      in.residual = to_matrix(y);
      FusedGemmArgs g{a, b, y, spec, {}, schedule};
      g.tensors.bias = bias;
      g.tensors.residual = y;
      EXPECT_EQ(fused_gemm(handle, g, GemmBackend::Sm90).backend, GemmBackend::Sm90);
      const auto want = reference::apply_epilogue(spec, reference_product(a, b), in);
      EXPECT_LE(rel_l2(download(y), want.out.data), bench::tolerance(dt));
    }
}

// The gated kernels (SwiGLU, GeGLU): gate and up are the two halves of each 256-column mainloop
// tile. B is dense random, so every column of A·Bᵀ differs and a wrong pairing (or a wrong output
// tile) cannot pass. Odd M and K; N from one tile (256) to nine (2304), N/2 the output's columns.
TEST_P(FusedGemmSm90, GatedChainMatchesReference) {
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  // 1100×4608×328: 9×18 tiles (a second tile for some CTAs), 6 k-blocks; and padded D rows.
  const Shape shapes[] = {{256, 512, 128}, {333, 768, 200}, {1000, 2304, 72}, {7, 256, 8}, {1100, 4608, 328},
                          {333, 768, 200, 8}};
  int i = 0;
  for (const auto& spec : {EpilogueSpec{}.swiglu(kSm90GateBlock), EpilogueSpec{}.geglu(kSm90GateBlock)})
    for (const auto& s : shapes)
      check_chain(handle, spec, GetParam(), s, GemmBackend::Sm90, seed + 8 * i++, Sm90Schedule::Cooperative);
}

// The scale-bias-activation kernels: each step of their form (α, row and column scales, bias,
// each activation, the clamp, R), with and without R, on odd, padded and multi-tile shapes. Row
// and column scales are distinct per row and column, so a mis-indexed broadcast cannot pass.
TEST_P(FusedGemmSm90, ScaleBiasActChainsMatchReference) {
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const EpilogueSpec chains[] = {
      EpilogueSpec{}.bias().silu(),
      EpilogueSpec{}.bias().residual(),
      EpilogueSpec{}.residual(),
      EpilogueSpec{}.scale(0.5f).row_scale().column_scale().bias().gelu_erf().clamp(-0.5f, 2.0f).residual(),
      EpilogueSpec{}.row_scale().relu().clamp(0.0f, 1.5f),
      EpilogueSpec{}.column_scale().gelu_tanh(),
  };
  const Shape shapes[] = {{333, 520, 200}, {7, 8, 8}, {2100, 2056, 328}, {333, 520, 200, 8}};
  int i = 0;
  for (const auto& spec : chains)
    for (const auto& s : shapes)
      check_chain(handle, spec, GetParam(), s, GemmBackend::Sm90, seed + 8 * i++, Sm90Schedule::Cooperative);
}

// D in e4m3 on the Hopper scale-bias-activation kernels (TMA: rows of whole 16-byte units, so N a
// multiple of 16 here; other N run on the portable kernel): whole tiles and the right edge (528 and
// 2064 columns end 16 into a 256-column tile), R, rows past M kept out of amax.
TEST_P(FusedGemmSm90, QuantizedScaleBiasActChainsMatchReference) {
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const DType dt = GetParam();
  const EpilogueSpec chains[] = {EpilogueSpec{}.quantize_e4m3(), EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3(),
                                 EpilogueSpec{}.row_scale().residual().quantize_e4m3()};
  const std::pair<Shape, std::int64_t> cases[] = {{{333, 528, 200}, 544}, {{130, 144, 40}, 144}, {{2100, 2064, 328}, 2064}};
  int i = 0;
  for (const auto& spec : chains)
    for (const auto& [shape, ld] : cases)
      check_quantized_chain(handle, spec, dt, shape, ld, GemmBackend::Sm90, seed + 16 * i++);
  check_quantized_chain(handle, EpilogueSpec{}.bias().relu().quantize_e4m3(), dt, {130, 144, 8}, 144,
                        GemmBackend::Sm90, seed + 16 * i++, Operands::NegativeProducts);
}

// A NaN in A makes its row of D NaN and the amax NaN (device/amax.cuh: fmaxf dropped it, and the
// amax said the largest finite value), on the portable and the Hopper kernels; the other rows
// still match the reference. D is poisoned (NaN) for one run, which checks the other rows, and
// zeroed for another, which checks that the NaN row was written.
TEST(FusedGemm, ANaNInTheInputsReachesDAndTheAmax) {
  FUSEKIT_REQUIRE_GPU();
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  constexpr std::int64_t kM = 333, kN = 528, kK = 200;
  const std::int64_t nan_row = static_cast<std::int64_t>(seed % kM), nan_col = static_cast<std::int64_t>(seed / kM % kK);
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " NaN at A(" << nan_row << ", " << nan_col << ")");
  DeviceTensor a(DType::BF16, {kM, kK}), b(DType::BF16, {kN, kK}), bias(DType::BF16, {kN}), d(DType::E4M3, {kM, kN}),
      scale(DType::F32, {1}), amax(DType::F32, {1});
  fill_uniform(a, seed, -1, 1);
  fill_uniform(b, seed + 1, -0.1f, 0.1f);
  fill_uniform(bias, seed + 2, -1, 1);
  auto host_a = download(a);
  host_a[static_cast<std::size_t>(nan_row * kK + nan_col)] = std::numeric_limits<double>::quiet_NaN();
  upload(host_a, a);
  upload(std::vector<double>{1.0}, scale);

  const EpilogueSpec spec = EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3();
  reference::EpilogueInputs in;
  in.bias = download(bias);
  in.quant_scale = 1.0;
  const auto want = reference::apply_epilogue(spec, reference_product(a, b), in);
  ASSERT_TRUE(std::isnan(want.amax)) << "the reference keeps the NaN too";

  std::vector<GemmBackend> backends{GemmBackend::Portable};
  if (current_device_info().cc_major == 9) backends.push_back(GemmBackend::Sm90);
  for (const GemmBackend backend : backends) {
    SCOPED_TRACE(gemm_backend_name(backend));
    FusedGemmArgs g{a, b, d, spec, {}};
    g.tensors.bias = bias;
    g.tensors.quant_scale = static_cast<const float*>(scale.data());
    g.tensors.amax = static_cast<float*>(amax.data());
    for (const bool poisoned : {true, false}) {
      if (poisoned) poison(d);
      else upload(std::vector<double>(static_cast<std::size_t>(kM * kN), 0.0), d);
      upload(std::vector<double>{0.0}, amax);
      EXPECT_EQ(fused_gemm(handle, g, backend).backend, backend);
      EXPECT_TRUE(std::isnan(download(amax)[0])) << "amax " << download(amax)[0];
      const auto got = download(d);
      std::int64_t off = 0, finite_in_nan_row = 0;
      for (std::int64_t i = 0; i < kM; ++i)
        for (std::int64_t j = 0; j < kN; ++j) {
          const auto e = static_cast<std::size_t>(i * kN + j);
          if (i == nan_row) finite_in_nan_row += !std::isnan(got[e]);
          else off += !(std::abs(got[e] - want.out.data[e]) <= e4m3_step(want.out.data[e]));
        }
      EXPECT_EQ(finite_in_nan_row, 0) << "elements of the NaN row not NaN (zeroed D: " << !poisoned << ")";
      if (poisoned) {
        EXPECT_EQ(off, 0) << "elements of the other rows farther than one e4m3 step";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedGemmSm90, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// fused_gemm's cuBLASLt route: each chain it maps onto a cuBLASLt epilogue, run through
// fused_gemm and checked like the other backends (odd shapes, padded D rows).
class FusedGemmCublasLt : public ::testing::TestWithParam<DType> {};

TEST_P(FusedGemmCublasLt, EveryMappedChainMatchesReference) {
  FUSEKIT_REQUIRE_GPU();
  FusedGemmHandle handle;
  const auto seed = testing::fresh_seed();
  const EpilogueSpec chains[] = {EpilogueSpec{},
                                 EpilogueSpec{}.relu(),
                                 EpilogueSpec{}.bias(),
                                 EpilogueSpec{}.bias().relu(),
                                 EpilogueSpec{}.gelu_tanh(),
                                 EpilogueSpec{}.bias().gelu_tanh(),
                                 EpilogueSpec{}.store_aux().gelu_tanh(),  // GELU_AUX: aux = the pre-activation
                                 EpilogueSpec{}.bias().store_aux().gelu_tanh()};
  const Shape shapes[] = {{333, 520, 200}, {1000, 136, 72, 8}, {7, 8, 8}};
  int i = 0;
  for (const auto& spec : chains)
    for (const auto& s : shapes) check_chain(handle, spec, GetParam(), s, GemmBackend::CublasLt, seed + 8 * i++);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedGemmCublasLt, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Only swiglu(kSm90GateBlock) on the Cooperative schedule is compiled; Auto runs it there (faster
// than GEMM + pointwise SwiGLU, docs/performance.md) and other gated chains on the portable kernel.
TEST(FusedGemm, GatedChainsRunOnHopperOnlyWithItsBlockAndSchedule) {
  FUSEKIT_REQUIRE_GPU();
  if (current_device_info().cc_major != 9) GTEST_SKIP() << "the Hopper kernel needs sm_90";
  DeviceTensor a(DType::BF16, {64, 32}), b(DType::BF16, {512, 32}), d(DType::BF16, {64, 256});
  FusedGemmArgs g{a, b, d, EpilogueSpec{}.swiglu(kSm90GateBlock), {}};
  EXPECT_EQ(plan_fused_gemm(g, GemmBackend::Sm90).backend, GemmBackend::Sm90);
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::Sm90);
  const auto refused = [&](const char* why) {
    try {
      plan_fused_gemm(g, GemmBackend::Sm90);
      ADD_FAILURE() << "expected Unsupported: " << why;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  g.schedule = Sm90Schedule::Pingpong;
  refused("Cooperative schedule only");
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::Portable);
  g.schedule = Sm90Schedule::Auto;
  g.epilogue = EpilogueSpec{}.swiglu(64);
  refused("no Hopper kernel is compiled");
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::Portable);
}

TEST(FusedGemm, AutoPicksCublasLtWhenItHasTheChainAndHopperOtherwise) {
  FUSEKIT_REQUIRE_GPU();
  const bool hopper = current_device_info().cc_major == 9;
  DeviceTensor a(DType::BF16, {64, 32}), b(DType::BF16, {48, 32}), d(DType::BF16, {64, 48});
  DeviceTensor bias(DType::BF16, {48}), res(DType::BF16, {64, 48}), aux(DType::BF16, {64, 48});
  FusedGemmArgs g{a, b, d, EpilogueSpec{}.bias().gelu_tanh(), {}};
  g.tensors.bias = bias;
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::CublasLt);
  g.epilogue = EpilogueSpec{}.bias().gelu_tanh().residual();
  g.tensors.residual = res;
  if (hopper) {
    const auto r = plan_fused_gemm(g);
    EXPECT_EQ(r.backend, GemmBackend::Sm90);
    EXPECT_NE(r.reason.find("cuBLASLt lacks"), std::string::npos) << r.reason;
  } else {
    EXPECT_THROW(plan_fused_gemm(g), Error);
  }
  // A chain cuBLASLt lacks, of the scale-bias-activation form: the Hopper kernel where there is one.
  g.epilogue = EpilogueSpec{}.bias().silu().residual();
  const auto r = plan_fused_gemm(g);
  EXPECT_EQ(r.backend, hopper ? GemmBackend::Sm90 : GemmBackend::Portable);
  EXPECT_NE(r.reason.find("bias → silu → residual"), std::string::npos) << r.reason;
  g.epilogue = EpilogueSpec{}.bias().store_aux().silu();
  g.tensors.aux = aux;
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::Portable) << "an aux store: no Hopper kernel";
  g.tensors.aux = {};
  // What no backend can run is refused with every reason: nine nodes, one more than the
  // portable kernel's chains hold.
  g.epilogue = EpilogueSpec{};
  for (int node = 0; node < 9; ++node) g.epilogue.scale(0.5f);
  try {
    plan_fused_gemm(g);
    FAIL() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("chains of at most 8 nodes"), std::string::npos) << e.what();
  }
}

// Auto's schedule for the residual chain on the Hopper kernel, in the report with its reason:
// Deferred at K >= 2048 over >= 3 tiles an SM, Cooperative below either; a requested schedule
// stays (plan_fused_gemm reads no memory: fake addresses, apart as its overlap checks ask).
TEST(FusedGemm, AutoDefersTheLongResidualChainOnHopper) {
  FUSEKIT_REQUIRE_GPU();
  if (current_device_info().cc_major != 9) GTEST_SKIP() << "the Hopper kernel needs sm_90";
  const auto plan = [](std::int64_t m, std::int64_t n, std::int64_t k, Sm90Schedule schedule) {
    // At most 8192 × 8192 bf16 (128 MiB) each: one slot apiece.
    FusedGemmArgs g;
    g.a = TensorView::matrix(testing::fake_address(0), DType::BF16, m, k, k);
    g.b = TensorView::matrix(testing::fake_address(1), DType::BF16, n, k, k);
    g.d = TensorView::matrix(testing::fake_address(2), DType::BF16, m, n, n);
    g.epilogue = EpilogueSpec{}.bias().gelu_tanh().residual();
    g.tensors.bias = TensorView::contiguous(testing::fake_address(3), DType::BF16, {n});
    g.tensors.residual = g.d;
    g.schedule = schedule;
    return plan_fused_gemm(g);
  };
  const int sms = current_device_info().sm_count;
  const auto deferred = plan(8192, 8192, 8192, Sm90Schedule::Auto);
  EXPECT_EQ(deferred.backend, GemmBackend::Sm90);
  // 64 × 32 = 2048 tiles of 128×256: over 3 an SM on every Hopper part (at most 132 SMs).
  EXPECT_EQ(deferred.schedule, Sm90Schedule::Deferred) << deferred.reason;
  EXPECT_NE(deferred.reason.find("cuBLASLt lacks"), std::string::npos) << deferred.reason;
  EXPECT_NE(deferred.reason.find(fmt::format("on {} SMs", sms)), std::string::npos) << deferred.reason;
  const auto short_k = plan(8192, 8192, 1024, Sm90Schedule::Auto);
  EXPECT_EQ(short_k.schedule, Sm90Schedule::Cooperative);
  EXPECT_NE(short_k.reason.find("K = 1024 < 2048"), std::string::npos) << short_k.reason;
  // 16 × 16 = 256 tiles: under 3 an SM wherever there are more than 85 SMs (the H100 and H200: 132).
  if (sms > 85) {
    EXPECT_EQ(plan(2048, 4096, 4096, Sm90Schedule::Auto).schedule, Sm90Schedule::Cooperative);
  }
  const auto requested = plan(8192, 8192, 1024, Sm90Schedule::Deferred);
  EXPECT_EQ(requested.schedule, Sm90Schedule::Deferred);
  EXPECT_NE(requested.reason.find("schedule requested"), std::string::npos) << requested.reason;
}

// What the Hopper kernel's TMA cannot take is refused before launch, naming the operand: a row
// stride of 66 bytes, D rows of 33 bf16 (66 bytes, in a stride of 80) and e4m3 D rows of 520 bytes
// (CUTLASS asks for whole 16-byte units). Auto then runs the last two on the portable kernel.
TEST(FusedGemm, MisalignedRowsAreRefusedByTheHopperKernelBeforeLaunch) {
  FUSEKIT_REQUIRE_GPU();
  if (current_device_info().cc_major != 9) GTEST_SKIP() << "the Hopper kernel needs sm_90";
  FusedGemmHandle handle;
  const auto refused = [&](const FusedGemmArgs& g, const char* why) {
    try {
      fused_gemm(handle, g, GemmBackend::Sm90);
      ADD_FAILURE() << "expected Unsupported: " << why;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  DeviceBuffer storage(64 * 40 * 2);
  DeviceTensor b33(DType::BF16, {48, 33}), d48(DType::BF16, {64, 48});
  refused({TensorView::matrix(storage.data(), DType::BF16, 64, 33, 33), b33, d48, EpilogueSpec{}, {}},
          "a's row stride in multiples of 16 bytes, not 33");

  DeviceTensor a(DType::BF16, {64, 32}), b(DType::BF16, {33, 32}), bias(DType::BF16, {33});
  FusedGemmArgs g{a, b, TensorView::matrix(storage.data(), DType::BF16, 64, 33, 40), EpilogueSpec{}.bias().silu(), {}};
  g.tensors.bias = bias;
  refused(g, "d's rows in multiples of 16 bytes (8 elements), not 33");
  EXPECT_EQ(plan_fused_gemm(g).backend, GemmBackend::Portable);

  DeviceTensor b520(DType::BF16, {520, 32}), d8(DType::E4M3, {64, 528}), scale(DType::F32, {1}), amax(DType::F32, {1});
  FusedGemmArgs q{a, b520, TensorView::matrix(d8.data(), DType::E4M3, 64, 520, 528), EpilogueSpec{}.quantize_e4m3(), {}};
  q.tensors.quant_scale = static_cast<const float*>(scale.data());
  q.tensors.amax = static_cast<float*>(amax.data());
  refused(q, "d's rows in multiples of 16 bytes (16 elements), not 520");
  EXPECT_EQ(plan_fused_gemm(q).backend, GemmBackend::Portable);
}

}  // namespace
}  // namespace fusekit
