// Every cuBLASLt epilogue against the CPU double reference: fresh random inputs each run,
// outputs poisoned before each run, odd sizes, every transpose combination cuBLASLt accepts.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <optional>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/gemm.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/gemm.hpp"
#include "fusekit/transfer.hpp"
#include "support/gpu.hpp"
#include "support/compare.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;
using testing::to_matrix;

using bench::tolerance;
using reference::Matrix;

constexpr std::int64_t kPreactLdMultiple = 8;
// Mask bits may differ from the reference only where the pre-activation is within rounding of 0.
constexpr double kMaskZeroBand = 1e-2;

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

struct Case {
  std::int64_t m, n, k;
  DType dtype;
  Epilogue epilogue;
  Transpose ta, tb;
  float alpha = 1.0f, beta = 0.0f;
};

// Runs one case; returns nullopt when cuBLASLt has no algorithm for it (ErrorKind::Unsupported).
std::optional<std::string> run_case(GemmHandle& handle, const Case& c, std::uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " epilogue " << epilogue_name(c.epilogue) << " "
                                    << dtype_name(c.dtype) << " M=" << c.m << " N=" << c.n << " K=" << c.k
                                    << " ta=" << (c.ta == Transpose::Yes) << " tb=" << (c.tb == Transpose::Yes));
  const bool ta = c.ta == Transpose::Yes, tb = c.tb == Transpose::Yes;
  DeviceTensor a(c.dtype, {ta ? c.k : c.m, ta ? c.m : c.k});
  DeviceTensor b(c.dtype, {tb ? c.n : c.k, tb ? c.k : c.n});
  DeviceTensor d(c.dtype, {c.m, c.n});
  DeviceTensor cm(c.dtype, {c.m, c.n});
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.k));
  fill_uniform(a, seed, -1.0f, 1.0f);
  fill_uniform(b, seed + 1, -scale * 2, scale * 2);
  fill_uniform(cm, seed + 2, -1.0f, 1.0f);
  poison(d);

  GemmArgs g;
  g.a = a;
  g.b = b;
  g.d = d;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.alpha = c.alpha;
  g.beta = c.beta;
  if (c.beta != 0.0f) g.c = cm;
  g.epilogue = c.epilogue;

  reference::GemmProblem p;
  p.a = to_matrix(a);
  p.b = to_matrix(b);
  if (c.beta != 0.0f) p.c = to_matrix(cm);
  p.trans_a = c.ta;
  p.trans_b = c.tb;
  p.alpha = c.alpha;
  p.beta = c.beta;
  p.epilogue = c.epilogue;

  DeviceTensor bias;
  if (bias_role(c.epilogue) != BiasRole::None) {
    bias = DeviceTensor(c.dtype, {bias_length(c.epilogue, c.m, c.n)});
    g.bias = bias;
    if (bias_role(c.epilogue) == BiasRole::Input) {
      fill_uniform(bias, seed + 3, -1.0f, 1.0f);
      p.bias = download(bias);
    } else {
      poison(bias);
    }
  }
  DeviceBuffer aux_storage;
  const AuxRole ar = aux_role(c.epilogue);
  if (ar != AuxRole::None) {
    const bool mask = ar == AuxRole::ReluMaskInput || ar == AuxRole::ReluMaskOutput;
    const DType aux_type = mask ? DType::U8 : c.dtype;
    const std::int64_t cols = mask ? relu_mask_row_bytes(c.n) : c.n;
    const std::int64_t ld = mask ? cols : round_up(c.n, kPreactLdMultiple);
    aux_storage = DeviceBuffer(static_cast<std::size_t>(c.m * ld) * dtype_size(aux_type));
    g.aux = TensorView::matrix(aux_storage.data(), aux_type, c.m, cols, ld);
    if (ar == AuxRole::ReluMaskInput) {
      constexpr float kByteRange = 256.0f;
      fill_uniform(g.aux, seed + 4, 0.0f, kByteRange);
      p.relu_mask_in = download_bytes(g.aux);
      p.mask_row_bytes = cols;
    } else if (ar == AuxRole::PreactInput) {
      fill_uniform(g.aux, seed + 4, -3.0f, 3.0f);
      p.preact_in = to_matrix(g.aux);
    } else {
      poison(g.aux);
    }
  }

  try {
    gemm(handle, g);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Unsupported) return std::nullopt;
    throw;
  }
  check_cuda(cudaDeviceSynchronize(), "gemm");
  const auto want = reference::gemm(p);
  const double bound = tolerance(c.dtype);

  const auto got_d = download(d);
  EXPECT_LE(rel_l2(got_d, want.d.data), bound) << "D";
  if (ar == AuxRole::PreactOutput) {
    EXPECT_LE(rel_l2(download(g.aux), want.preact.data), bound) << "aux pre-activation";
  }
  if (ar == AuxRole::ReluMaskOutput) {
    const auto bytes = download_bytes(g.aux);
    auto pre_problem = p;
    pre_problem.epilogue = bias_role(c.epilogue) == BiasRole::Input ? Epilogue::Bias : Epilogue::Default;
    const Matrix pre = reference::gemm(pre_problem).d;
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < c.m; ++i)
      for (std::int64_t j = 0; j < c.n; ++j) {
        const bool got = reference::relu_mask_bit(bytes, g.aux.stride(0), i, j);
        const bool exp = reference::relu_mask_bit(want.relu_mask, want.mask_row_bytes, i, j);
        // Near zero, rounding in the GPU's accumulation may flip a bit; nowhere else.
        if (got != exp && std::abs(pre(i, j)) >= kMaskZeroBand) ++wrong;
      }
    EXPECT_EQ(wrong, 0) << "ReLU mask bits";
  }
  if (bias_role(c.epilogue) == BiasRole::GradOutput) {
    EXPECT_LE(rel_l2(download(bias), want.bias_grad), bound) << "bias gradient";
  }
  return std::string(handle.last_plan().epilogue);
}

class GemmEpilogueGpu : public ::testing::TestWithParam<std::tuple<Epilogue, DType>> {};

// Every epilogue in every transpose combination, at an aligned and an odd size. Each epilogue
// must run in at least one layout, and every layout cuBLASLt accepts must match the reference.
TEST_P(GemmEpilogueGpu, MatchesCpuReference) {
  FUSEKIT_REQUIRE_GPU();
  const auto [epilogue, dtype] = GetParam();
  GemmHandle handle;
  const std::uint64_t seed = testing::fresh_seed();
  struct Size { std::int64_t m, n, k; };
  const Size sizes[] = {{128, 192, 64}, {136, 264, 72}, {131, 257, 75}};
  int supported = 0, tried = 0;
  std::string unsupported;
  for (const auto& s : sizes)
    for (auto ta : {Transpose::No, Transpose::Yes})
      for (auto tb : {Transpose::No, Transpose::Yes}) {
        ++tried;
        const Case c{s.m, s.n, s.k, dtype, epilogue, ta, tb};
        if (run_case(handle, c, seed + tried * 16)) {
          ++supported;
        } else {
          unsupported += fmt::format(" [{}x{}x{} ta={} tb={}]", s.m, s.n, s.k, ta == Transpose::Yes, tb == Transpose::Yes);
        }
      }
  RecordProperty("supported_layouts", supported);
  if (!unsupported.empty()) std::cout << "  cuBLASLt has no algorithm for:" << unsupported << "\n";
  EXPECT_GT(supported, 0) << "epilogue " << epilogue_name(epilogue) << " ran in no layout";
}

INSTANTIATE_TEST_SUITE_P(AllEpilogues, GemmEpilogueGpu,
                         ::testing::Combine(::testing::ValuesIn(kAllEpilogues),
                                            ::testing::Values(DType::BF16, DType::F16)),
                         [](const auto& info) {
                           return std::string(epilogue_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

TEST(GemmGpu, AlphaBetaAndCInTheLinearLayout) {
  FUSEKIT_REQUIRE_GPU();
  GemmHandle handle;
  const auto seed = testing::fresh_seed();
  for (auto e : {Epilogue::Default, Epilogue::GeluBias, Epilogue::ReluAuxBias}) {
    const Case c{200, 136, 96, DType::BF16, e, Transpose::No, Transpose::Yes, 0.75f, 0.5f};
    EXPECT_TRUE(run_case(handle, c, seed)) << epilogue_name(e);
  }
}

TEST(GemmGpu, HeuristicResultIsCachedPerProblem) {
  FUSEKIT_REQUIRE_GPU();
  GemmHandle handle;
  const auto seed = testing::fresh_seed();
  const Case c{128, 128, 64, DType::BF16, Epilogue::GeluBias, Transpose::No, Transpose::Yes};
  ASSERT_TRUE(run_case(handle, c, seed));
  const GemmPlanInfo first = handle.last_plan();
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(first.epilogue, epilogue_name(Epilogue::GeluBias));
  EXPECT_TRUE(first.algorithm.starts_with("algo ")) << first.algorithm;
  EXPECT_GT(first.heuristic_waves, 0.0f);
  EXPECT_LE(first.workspace_bytes, GemmHandle::kDefaultWorkspaceBytes);
  ASSERT_TRUE(run_case(handle, c, seed + 1));
  EXPECT_TRUE(handle.last_plan().cache_hit);
  EXPECT_EQ(handle.last_plan().algorithm, first.algorithm);  // the cached plan's
  EXPECT_NE(describe(first).find(first.algorithm), std::string::npos) << describe(first);
  EXPECT_EQ(handle.cached_plans(), 1u);
  ASSERT_TRUE(run_case(handle, {128, 136, 64, DType::BF16, Epilogue::GeluBias, Transpose::No, Transpose::Yes}, seed));
  EXPECT_EQ(handle.cached_plans(), 2u);
}

// D[b] = gelu(A[b]·B[b]ᵀ + bias[b]) for a strided batch, bias and aux with batch strides.
TEST(GemmGpu, StridedBatchesWithBatchedBiasAndAux) {
  FUSEKIT_REQUIRE_GPU();
  GemmHandle handle;
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  constexpr std::int64_t kBatch = 3, m = 96, n = 72, k = 40;
  DeviceTensor a(DType::BF16, {kBatch, m, k}), b(DType::BF16, {kBatch, n, k}), d(DType::BF16, {kBatch, m, n});
  DeviceTensor bias(DType::BF16, {kBatch, n}), aux(DType::BF16, {kBatch, m, n});
  fill_uniform(a, seed, -1, 1);
  fill_uniform(b, seed + 1, -0.3f, 0.3f);
  fill_uniform(bias, seed + 2, -1, 1);
  poison(d);
  poison(aux);
  GemmArgs g;
  g.a = a;
  g.b = b;
  g.d = d;
  g.trans_b = Transpose::Yes;
  g.epilogue = Epilogue::GeluAuxBias;
  g.bias = bias;
  g.aux = aux;
  gemm(handle, g);
  const auto ha = download(a), hb = download(b), hd = download(d), hbias = download(bias), haux = download(aux);
  for (std::int64_t i = 0; i < kBatch; ++i) {
    reference::GemmProblem p;
    p.a = Matrix(m, k);
    p.a.data.assign(ha.begin() + i * m * k, ha.begin() + (i + 1) * m * k);
    p.b = Matrix(n, k);
    p.b.data.assign(hb.begin() + i * n * k, hb.begin() + (i + 1) * n * k);
    p.trans_b = Transpose::Yes;
    p.epilogue = Epilogue::GeluAuxBias;
    p.bias.assign(hbias.begin() + i * n, hbias.begin() + (i + 1) * n);
    const auto want = reference::gemm(p);
    std::vector<double> got(hd.begin() + i * m * n, hd.begin() + (i + 1) * m * n);
    std::vector<double> got_aux(haux.begin() + i * m * n, haux.begin() + (i + 1) * m * n);
    EXPECT_LE(rel_l2(got, want.d.data), tolerance(DType::BF16)) << "batch " << i;
    EXPECT_LE(rel_l2(got_aux, want.preact.data), tolerance(DType::BF16)) << "aux batch " << i;
  }
}

// fp8 e4m3 inputs with per-tensor scales: bf16 output; and e4m3 output with a d scale and amax.
TEST(GemmGpu, Fp8WithScalesAndAmax) {
  FUSEKIT_REQUIRE_GPU();
  const auto info = current_device_info();
  constexpr int kFp8MinMajor = 8, kFp8MinMinor = 9;
  if (info.cc_major < kFp8MinMajor || (info.cc_major == kFp8MinMajor && info.cc_minor < kFp8MinMinor))
    GTEST_SKIP() << "fp8 GEMM needs sm_89 or newer; this is sm_" << info.cc_major << info.cc_minor;
  GemmHandle handle;
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  constexpr std::int64_t m = 144, n = 208, k = 96;
  constexpr float kAScale = 0.5f, kBScale = 0.125f, kDScale = 4.0f;
  // One scalar per 16-byte slot: cuBLASLt needs each scale 16-byte aligned.
  constexpr int kSlot = 4, kA = 0, kB = 1, kD = 2, kAmax = 3;
  DeviceTensor a(DType::E4M3, {m, k}), b(DType::E4M3, {n, k});
  DeviceTensor d16(DType::BF16, {m, n}), d8(DType::E4M3, {m, n}), scales(DType::F32, {4 * kSlot});
  fill_uniform(a, seed, -4, 4);
  fill_uniform(b, seed + 1, -4, 4);
  std::vector<double> slots(4 * kSlot, 0.0);
  slots[kA * kSlot] = kAScale;
  slots[kB * kSlot] = kBScale;
  slots[kD * kSlot] = kDScale;
  upload(slots, scales);
  auto slot = [&](int i) { return static_cast<float*>(scales.data()) + i * kSlot; };
  reference::GemmProblem p;
  p.a = to_matrix(a);
  p.b = to_matrix(b);
  p.trans_b = Transpose::Yes;
  p.scale_ab = double(kAScale) * kBScale;
  const auto want = reference::gemm(p);

  GemmArgs g;
  g.a = a;
  g.b = b;
  g.trans_b = Transpose::Yes;
  g.d = d16;
  g.fp8 = {slot(kA), slot(kB), nullptr, nullptr};
  poison(d16);
  gemm(handle, g);
  EXPECT_LE(rel_l2(download(d16), want.d.data), tolerance(DType::BF16)) << "bf16 output";

  g.d = d8;
  g.fp8 = {slot(kA), slot(kB), slot(kD), slot(kAmax)};
  poison(d8);
  gemm(handle, g);
  auto scaled = want.d.data;
  for (auto& v : scaled) v *= kDScale;
  EXPECT_LE(rel_l2(download(d8), scaled), tolerance(DType::E4M3)) << "e4m3 output with d_scale";
  const double amax = download(TensorView::contiguous(slot(kAmax), DType::F32, {1}))[0];
  EXPECT_NEAR(amax, want.amax, want.amax * tolerance(DType::BF16)) << "amax is taken before the d scale";

  // What cuBLASLt cannot do is refused before any launch, naming the argument.
  g.d = d16;
  g.fp8 = {slot(kA), slot(kB), nullptr, slot(kAmax)};
  EXPECT_THROW(gemm(handle, g), Error) << "amax with a bf16 D";
  g.fp8 = {slot(kA) + 1, slot(kB), nullptr, nullptr};
  try {
    gemm(handle, g);
    ADD_FAILURE() << "expected an error for a misaligned scale";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8.a_scale address"), std::string::npos) << e.what();
  }
}

// The plan follows the bias's alignment (cuBLASLt's heuristic reads it from the pointer): a bias
// one element past a 16-byte boundary; and a single row whose views carry a row stride of 0,
// which addresses nothing (cuBLASLt is given the least leading dimension instead).
TEST(GemmGpu, BiasAtAnElementOffsetAndASingleRowOfAnyStride) {
  FUSEKIT_REQUIRE_GPU();
  GemmHandle handle;
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (const std::int64_t m : {std::int64_t{200}, std::int64_t{1}}) {
    constexpr std::int64_t n = 136, k = 72;
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    DeviceTensor a_storage(DType::BF16, {m, k}), b(DType::BF16, {n, k}), d_storage(DType::BF16, {m, n});
    DeviceTensor bias_storage(DType::BF16, {n + 1});
    const std::int64_t row_stride = m == 1 ? 0 : -1;  // -1: packed rows
    const TensorView a = TensorView::matrix(a_storage.data(), DType::BF16, m, k, row_stride < 0 ? k : row_stride);
    const TensorView d = TensorView::matrix(d_storage.data(), DType::BF16, m, n, row_stride < 0 ? n : row_stride);
    const TensorView bias =
        TensorView::contiguous(static_cast<std::uint16_t*>(bias_storage.data()) + 1, DType::BF16, {n});
    fill_uniform(a, seed, -1.0f, 1.0f);
    fill_uniform(b, seed + 1, -0.25f, 0.25f);
    fill_uniform(bias, seed + 2, -1.0f, 1.0f);
    poison(d);
    GemmArgs g;
    g.a = a;
    g.b = b;
    g.d = d;
    g.trans_b = Transpose::Yes;
    g.epilogue = Epilogue::GeluBias;
    g.bias = bias;
    gemm(handle, g);
    check_cuda(cudaDeviceSynchronize(), "gemm");
    reference::GemmProblem p;
    p.a = to_matrix(a);
    p.b = to_matrix(b);
    p.trans_b = Transpose::Yes;
    p.epilogue = Epilogue::GeluBias;
    p.bias = download(bias);
    EXPECT_LE(rel_l2(download(d), reference::gemm(p).d.data), tolerance(DType::BF16));
  }
}

TEST(GemmGpu, HostPointerIsRejectedBeforeLaunch) {
  FUSEKIT_REQUIRE_GPU();
  GemmHandle handle;
  DeviceTensor a(DType::BF16, {64, 32}), d(DType::BF16, {64, 48});
  std::vector<std::uint16_t> host(48 * 32);
  GemmArgs g;
  g.a = a;
  g.b = TensorView::matrix(host.data(), DType::BF16, 48, 32, 32);
  g.trans_b = Transpose::Yes;
  g.d = d;
  try {
    gemm(handle, g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("b pointer: expected device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fusekit
