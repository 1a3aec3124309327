// Level-1 backend: one cuBLASLt matmul with a fused epilogue.
//
// fusekit is row-major and cuBLASLt column-major. A row-major [r, c] matrix with row stride ld
// is the column-major [c, r] matrix with the same ld, so D = op(A)·op(B) is computed as
// Dᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's A is our B, its B is our A, its m is our N and its n our M.
// Per-row vectors of cuBLASLt's D are therefore our per-column vectors (bias), and its BGRADA
// (reduce its A over k) is our BGRADB.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <iterator>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/gemm.hpp"

namespace fusekit {

namespace {

constexpr std::size_t kMaxAlignmentBytes = 16;
constexpr int kBitsPerByte = 8;
// NOTE: cuBLASLt requires the GELU pre-activation aux leading dimension and batch stride to be
// multiples of kPreactAuxLdMultiple elements (fusekit/gemm.hpp), and the ReLU mask's to be
// multiples of 128 bits.
constexpr std::int64_t kReluMaskLdMultipleBits = 128;

cudaDataType_t to_cuda(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::E4M3: return CUDA_R_8F_E4M3;
    case DType::E5M2: return CUDA_R_8F_E5M2;
    case DType::U8: return CUDA_R_8U;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t to_cublaslt(Epilogue e) {
  switch (e) {
    case Epilogue::Default: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::ReluAux: return CUBLASLT_EPILOGUE_RELU_AUX;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::ReluAuxBias: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case Epilogue::DRelu: return CUBLASLT_EPILOGUE_DRELU;
    case Epilogue::DReluBGrad: return CUBLASLT_EPILOGUE_DRELU_BGRAD;
    case Epilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::GeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::GeluBias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::DGeluBGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    // Operands are swapped (see the file comment): our A is cuBLASLt's B.
    case Epilogue::BGradA: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::BGradB: return CUBLASLT_EPILOGUE_BGRADA;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Largest power of two up to 16 dividing the address and every non-unit stride in bytes.
std::size_t alignment_of(const TensorView& t) {
  if (t.empty()) return kMaxAlignmentBytes;
  std::size_t a = kMaxAlignmentBytes;
  auto fold = [&](std::uint64_t v) {
    if (v != 0) a = std::min<std::size_t>(a, std::size_t{1} << std::countr_zero(v));
  };
  fold(reinterpret_cast<std::uintptr_t>(t.data));
  for (int d = 0; d < t.rank; ++d)
    if (t.shape[d] > 1 && t.strides[d] != 1) fold(static_cast<std::uint64_t>(t.strides[d]) * t.element_size());
  return a;
}

struct Shape {
  std::int64_t batch, m, n, k;
};

std::int64_t rows_of(const TensorView& t) { return t.size(-2); }
std::int64_t cols_of(const TensorView& t) { return t.size(-1); }
std::int64_t batch_of(const TensorView& t) { return t.rank == 3 ? t.shape[0] : 1; }
std::int64_t batch_stride_of(const TensorView& t) { return t.rank == 3 ? t.strides[0] : 0; }

// The leading dimension cuBLASLt is given for a matrix: its row stride, or, for a single row
// (whose stride addresses nothing and may be anything a view carries, 0 included), the least
// cuBLASLt accepts, `min_ld` (a row's elements, rounded up to its ld multiple where it has one).
std::int64_t leading_dimension(const TensorView& t, std::int64_t min_ld) {
  return rows_of(t) > 1 ? t.stride(-2) : std::max(t.stride(-2), min_ld);
}
std::int64_t leading_dimension(const TensorView& t) { return leading_dimension(t, cols_of(t)); }

// The aux's leading dimension in its own elements (bytes for a ReLU mask).
std::int64_t aux_leading_dimension(const GemmArgs& g, std::int64_t n) {
  const AuxRole ar = aux_role(g.epilogue);
  const bool mask = ar == AuxRole::ReluMaskInput || ar == AuxRole::ReluMaskOutput;
  return leading_dimension(g.aux, mask ? relu_mask_row_bytes(n)
                                       : (n + kPreactAuxLdMultiple - 1) / kPreactAuxLdMultiple * kPreactAuxLdMultiple);
}

void check_matrix(std::string_view arg, const TensorView& t) {
  check::structure(arg, t);
  require(t.rank == 2 || t.rank == 3, fmt::format("{} rank", arg), "2 (matrix) or 3 (batch of matrices)",
          t.rank);
}

Shape validate(const GemmArgs& g) {
  check_matrix("a", g.a);
  check_matrix("b", g.b);
  check_matrix("d", g.d);
  const bool fp8 = is_fp8(g.a.dtype);
  check::dtype("a", g.a, {DType::F16, DType::BF16, DType::E4M3, DType::E5M2});
  if (fp8) {
    check::dtype("b", g.b, {DType::E4M3, DType::E5M2});
    require(!(g.a.dtype == DType::E5M2 && g.b.dtype == DType::E5M2), "b dtype",
            "e4m3 when a is e5m2 (cuBLASLt has no e5m2 x e5m2 kernel)", dtype_name(g.b.dtype));
    check::dtype("d", g.d, {DType::BF16, DType::F16, DType::F32, DType::E4M3, DType::E5M2});
    require(g.trans_a == Transpose::No && g.trans_b == Transpose::Yes, "trans_a/trans_b",
            "No/Yes for fp8 (A [M,K], B [N,K], K contiguous in both)",
            fmt::format("{}/{}", g.trans_a == Transpose::Yes ? "Yes" : "No",
                        g.trans_b == Transpose::Yes ? "Yes" : "No"));
  } else {
    require(g.b.dtype == g.a.dtype, "b dtype", dtype_name(g.a.dtype), dtype_name(g.b.dtype));
    require(g.d.dtype == g.a.dtype || g.d.dtype == DType::F32, "d dtype",
            fmt::format("{} or f32", dtype_name(g.a.dtype)), dtype_name(g.d.dtype));
    require(g.fp8.a_scale == nullptr && g.fp8.b_scale == nullptr && g.fp8.d_scale == nullptr &&
                g.fp8.amax_d == nullptr,
            "fp8 scales", "none for f16/bf16 inputs", "a scale or amax pointer");
  }
  require(g.fp8.d_scale == nullptr || is_fp8(g.d.dtype), "fp8.d_scale", "null unless d is fp8",
          fmt::format("a pointer with d {}", dtype_name(g.d.dtype)));
  // NOTE: cuBLASLt computes amax only for an fp8 D (it rejects the heuristic otherwise), and
  // reads scales with 16-byte accesses: a scale at a 4-byte offset fails at run time with
  // CUBLAS_STATUS_NOT_SUPPORTED, so both are checked here, before any launch.
  require(g.fp8.amax_d == nullptr || is_fp8(g.d.dtype), "fp8.amax_d", "null unless d is fp8",
          fmt::format("a pointer with d {}", dtype_name(g.d.dtype)));
  for (auto [name, ptr] : {std::pair<const char*, const void*>{"fp8.a_scale", g.fp8.a_scale},
                           {"fp8.b_scale", g.fp8.b_scale},
                           {"fp8.d_scale", g.fp8.d_scale},
                           {"fp8.amax_d", g.fp8.amax_d}}) {
    if (ptr == nullptr) continue;
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    require(addr % kMaxAlignmentBytes == 0, fmt::format("{} address", name), "a multiple of 16 bytes",
            fmt::format("{:#x}", addr));
  }

  for (auto [name, t] : {std::pair{"trans_a", g.trans_a}, {"trans_b", g.trans_b}})
    require(t == Transpose::No || t == Transpose::Yes, name, "No or Yes", static_cast<int>(t));
  require(std::find(std::begin(kAllEpilogues), std::end(kAllEpilogues), g.epilogue) != std::end(kAllEpilogues),
          "epilogue", "one of the 16 Epilogue values", static_cast<int>(g.epilogue));
  const std::int64_t m = g.trans_a == Transpose::No ? rows_of(g.a) : cols_of(g.a);
  const std::int64_t k = g.trans_a == Transpose::No ? cols_of(g.a) : rows_of(g.a);
  const std::int64_t kb = g.trans_b == Transpose::No ? rows_of(g.b) : cols_of(g.b);
  const std::int64_t n = g.trans_b == Transpose::No ? cols_of(g.b) : rows_of(g.b);
  require(kb == k, "b shape", fmt::format("K = {} along the reduced dimension of op(b)", k), kb);
  require(rows_of(g.d) == m && cols_of(g.d) == n, "d shape", fmt::format("[{}, {}]", m, n),
          fmt::format("[{}, {}]", rows_of(g.d), cols_of(g.d)));
  require(m > 0 && n > 0 && k > 0, "M, N, K", "all positive", fmt::format("{}, {}, {}", m, n, k));
  const std::int64_t batch = batch_of(g.d);
  require(batch >= 1, "d batch", ">= 1", batch);
  require(batch <= INT32_MAX, "d batch", "at most 2^31 - 1 (cuBLASLt's batch count is 32-bit)", batch);
  require(g.a.rank == g.d.rank && g.b.rank == g.d.rank, "a/b rank", fmt::format("{} (the rank of d)", g.d.rank),
          fmt::format("{}/{}", g.a.rank, g.b.rank));
  require(batch_of(g.a) == batch && batch_of(g.b) == batch, "a/b batch", batch,
          fmt::format("{}/{}", batch_of(g.a), batch_of(g.b)));

  if (g.beta != 0.0f) {
    require(!g.c.empty(), "c", "a tensor when beta != 0", "none");
  }
  if (!g.c.empty()) {
    check_matrix("c", g.c);
    check::same_shape("c", g.c, "d", g.d);
    if (is_fp8(g.d.dtype))
      check::dtype("c", g.c, {DType::BF16, DType::F16});
    else
      require(g.c.dtype == g.d.dtype, "c dtype", dtype_name(g.d.dtype), dtype_name(g.c.dtype));
  }
  if (fp8) {
    for (auto [name, t] : {std::pair{"a", &g.a}, {"b", &g.b}, {"d", &g.d}})
      require(alignment_of(*t) == kMaxAlignmentBytes, fmt::format("{} alignment", name),
              "16 bytes (address and row stride) for fp8 GEMMs", fmt::format("{} bytes", alignment_of(*t)));
  }

  const Epilogue e = g.epilogue;
  const BiasRole br = bias_role(e);
  if (br == BiasRole::None) {
    require(g.bias.empty(), "bias", fmt::format("none for epilogue {}", epilogue_name(e)), g.bias.describe());
  } else {
    const std::int64_t len = bias_length(e, m, n);
    check::structure("bias", g.bias);
    // A bias gradient is an output: one vector per batch, or every batch would write the same one.
    if (batch > 1 && (g.bias.rank == 2 || br == BiasRole::GradOutput))
      check::shape("bias", g.bias, {batch, len});
    else
      check::shape("bias", g.bias, {len});
    const DType expected = is_fp8(g.d.dtype) || g.d.dtype == DType::F32 ? DType::BF16 : g.d.dtype;
    if (fp8 || g.d.dtype == DType::F32)
      check::dtype("bias", g.bias, {DType::BF16, DType::F16, DType::F32});
    else
      check::dtype("bias", g.bias, {expected});
  }
  const AuxRole ar = aux_role(e);
  if (ar == AuxRole::None) {
    require(g.aux.empty(), "aux", fmt::format("none for epilogue {}", epilogue_name(e)), g.aux.describe());
  } else {
    check_matrix("aux", g.aux);
    require(g.aux.rank == g.d.rank && batch_of(g.aux) == batch, "aux batch", batch, batch_of(g.aux));
    if (ar == AuxRole::ReluMaskInput || ar == AuxRole::ReluMaskOutput) {
      check::dtype("aux", g.aux, {DType::U8});
      require(rows_of(g.aux) == m && cols_of(g.aux) >= relu_mask_row_bytes(n), "aux shape",
              fmt::format("[{}, >= {}] (a ReLU bit mask, relu_mask_row_bytes(N))", m, relu_mask_row_bytes(n)),
              fmt::format("[{}, {}]", rows_of(g.aux), cols_of(g.aux)));
      require(aux_leading_dimension(g, n) * kBitsPerByte % kReluMaskLdMultipleBits == 0, "aux row stride",
              "a multiple of 16 bytes", g.aux.stride(-2));
    } else {
      require(rows_of(g.aux) == m && cols_of(g.aux) == n, "aux shape", fmt::format("[{}, {}]", m, n),
              fmt::format("[{}, {}]", rows_of(g.aux), cols_of(g.aux)));
      require(g.aux.dtype == g.d.dtype, "aux dtype", dtype_name(g.d.dtype), dtype_name(g.aux.dtype));
      require(aux_leading_dimension(g, n) % kPreactAuxLdMultiple == 0, "aux row stride", "a multiple of 8 elements",
              g.aux.stride(-2));
    }
    if (batch > 1)
      require(batch_stride_of(g.aux) % (ar == AuxRole::PreactInput || ar == AuxRole::PreactOutput
                                            ? kPreactAuxLdMultiple
                                            : kReluMaskLdMultipleBits / kBitsPerByte) ==
                  0,
              "aux batch stride", "a multiple of 8 elements (16 bytes for a mask)", batch_stride_of(g.aux));
  }
  // cuBLASLt writes d while it still reads a and b; c may be d itself (in place), nothing else.
  check::disjoint("d", g.d, "a", g.a, check::InPlace::Forbidden);
  check::disjoint("d", g.d, "b", g.b, check::InPlace::Forbidden);
  check::disjoint("d", g.d, "c", g.c, check::InPlace::Allowed);
  check::disjoint("aux", g.aux, "d", g.d, check::InPlace::Forbidden);
  // Every other pair with an output shares no byte either: d is written while the bias and the
  // scales are read, and a bias gradient, an aux output and the amax while every other argument
  // is read or written.
  const TensorView a_scale = check::scalar_view(g.fp8.a_scale), b_scale = check::scalar_view(g.fp8.b_scale);
  const TensorView d_scale = check::scalar_view(g.fp8.d_scale), amax_d = check::scalar_view(g.fp8.amax_d);
  check::disjoint_from_each("d", g.d, {{"bias", &g.bias}, {"fp8.a_scale", &a_scale}, {"fp8.b_scale", &b_scale},
                                       {"fp8.d_scale", &d_scale}});
  const TensorView none;
  const bool aux_written = ar == AuxRole::ReluMaskOutput || ar == AuxRole::PreactOutput;
  for (const auto& [arg, out] : {check::NamedView{"aux", aux_written ? &g.aux : &none},
                                 check::NamedView{"bias", br == BiasRole::GradOutput ? &g.bias : &none},
                                 check::NamedView{"fp8.amax_d", &amax_d}})
    for (const auto& [other_arg, other] :
         {check::NamedView{"a", &g.a}, check::NamedView{"b", &g.b}, check::NamedView{"c", &g.c},
          check::NamedView{"d", &g.d}, check::NamedView{"bias", &g.bias}, check::NamedView{"aux", &g.aux},
          check::NamedView{"fp8.a_scale", &a_scale}, check::NamedView{"fp8.b_scale", &b_scale},
          check::NamedView{"fp8.d_scale", &d_scale}, check::NamedView{"fp8.amax_d", &amax_d}})
      if (other != out) check::disjoint(arg, *out, other_arg, *other, check::InPlace::Forbidden);
  // Last, the checks that ask the driver: every pointer is device memory of this device.
  for (auto [name, t] : {std::pair{"a", &g.a}, {"b", &g.b}, {"c", &g.c}, {"d", &g.d}, {"bias", &g.bias},
                         {"aux", &g.aux}})
    if (!t->empty()) check::on_current_device(name, *t);
  for (auto [name, ptr] : {std::pair<const char*, const float*>{"fp8.a_scale", g.fp8.a_scale},
                           {"fp8.b_scale", g.fp8.b_scale},
                           {"fp8.d_scale", g.fp8.d_scale},
                           {"fp8.amax_d", g.fp8.amax_d}})
    if (ptr != nullptr) check::on_current_device(name, ptr);
  return {batch, m, n, k};
}

// Everything that selects a cuBLASLt algorithm; pointers enter only through their alignment.
struct PlanKey {
  std::array<std::int64_t, 25> v{};
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    std::size_t h = 0;
    for (auto x : k.v) h = h * 1099511628211ull ^ std::hash<std::int64_t>{}(x);
    return h;
  }
};

PlanKey make_key(const GemmArgs& g, const Shape& s) {
  PlanKey key;
  int i = 0;
  auto put = [&](std::int64_t x) { key.v.at(static_cast<std::size_t>(i++)) = x; };
  put(s.batch); put(s.m); put(s.n); put(s.k);
  put(static_cast<int>(g.a.dtype)); put(static_cast<int>(g.b.dtype));
  put(static_cast<int>(g.d.dtype)); put(g.c.empty() ? -1 : static_cast<int>(g.c.dtype));
  put(static_cast<int>(g.epilogue)); put(static_cast<int>(g.trans_a)); put(static_cast<int>(g.trans_b));
  put(leading_dimension(g.a)); put(leading_dimension(g.b)); put(leading_dimension(g.d));
  put(g.c.empty() ? 0 : leading_dimension(g.c));
  put(batch_stride_of(g.a) | (batch_stride_of(g.b) << 32)); put(batch_stride_of(g.d));
  put(g.aux.empty() ? 0 : aux_leading_dimension(g, s.n)); put(g.bias.empty() ? -1 : static_cast<int>(g.bias.dtype));
  put(static_cast<std::int64_t>(alignment_of(g.a) | alignment_of(g.b) << 8 | alignment_of(g.c) << 16 |
                                alignment_of(g.d) << 24));
  put((g.beta != 0.0f) | (g.fp8.a_scale != nullptr) << 1 | (g.fp8.b_scale != nullptr) << 2 |
      (g.fp8.d_scale != nullptr) << 3 | (g.fp8.amax_d != nullptr) << 4);
  put(g.aux.empty() ? 0 : batch_stride_of(g.aux));
  put(g.bias.rank == 2 ? g.bias.strides[0] : 0);
  put(g.c.empty() ? 0 : batch_stride_of(g.c));
  put(static_cast<std::int64_t>(alignment_of(g.bias) | alignment_of(g.aux) << 8));
  return key;
}

struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  ~Layout() { if (h) cublasLtMatrixLayoutDestroy(h); }
};

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v, const char* what) {
  check_cublas(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)), what);
}

// An algorithm by the configuration ids cuBLASLt reports for it (cublasLtMatmulAlgoConfigAttributes_t):
// enough to tell two choices apart, e.g. the heuristic's answer with and without a bias pointer.
std::string algorithm_ids(const cublasLtMatmulAlgo_t& algo) {
  const auto id = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto value) {
    std::size_t written = 0;
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written),
                 "cublasLtMatmulAlgoConfigGetAttribute");
    return static_cast<std::int64_t>(value);
  };
  return fmt::format("algo {} tile {} stages {} cluster {} inner {} split-k {} reduction {} swizzle {} custom {}",
                     id(CUBLASLT_ALGO_CONFIG_ID, std::int32_t{}), id(CUBLASLT_ALGO_CONFIG_TILE_ID, std::uint32_t{}),
                     id(CUBLASLT_ALGO_CONFIG_STAGES_ID, std::uint32_t{}),
                     id(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, std::uint16_t{}),
                     id(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, std::uint16_t{}),
                     id(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, std::int32_t{}),
                     id(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, std::uint32_t{}),
                     id(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, std::uint32_t{}),
                     id(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, std::uint32_t{}));
}

}  // namespace

// One cached plan: descriptors with every pointer-free attribute set, and the chosen algorithm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  Layout a, b, c, d;  // in cuBLASLt's terms: a = our B, b = our A
  cublasLtMatmulAlgo_t algo{};
  std::string algorithm;  // the algorithm's configuration ids, for GemmPlanInfo
  std::size_t algo_workspace_bytes = 0;
  float waves = 0;
  ~Plan() { if (desc) cublasLtMatmulDescDestroy(desc); }
};

struct GemmHandle::Impl {
  std::size_t workspace_bytes;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer workspace;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  GemmPlanInfo last;

  ~Impl() { if (lt) cublasLtDestroy(lt); }

  void ensure_ready() {
    if (lt) return;
    check_cublas(cublasLtCreate(&lt), "cublasLtCreate");
    workspace = DeviceBuffer(workspace_bytes);
  }

  std::unique_ptr<Plan> build(const GemmArgs& g, const Shape& s) {
    auto p = std::make_unique<Plan>();
    const bool fp8 = is_fp8(g.a.dtype);
    check_cublas(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = g.trans_b == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = g.trans_a == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a, "TRANSA");
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b, "TRANSB");
    const auto epi = static_cast<std::uint32_t>(to_cublaslt(g.epilogue));
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epi, "EPILOGUE");
    if (!g.bias.empty()) {
      const std::int32_t bias_type = to_cuda(g.bias.dtype);
      set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, "BIAS_DATA_TYPE");
      const std::int64_t bias_batch_stride = g.bias.rank == 2 ? g.bias.strides[0] : 0;
      set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, bias_batch_stride, "BIAS_BATCH_STRIDE");
    }
    const AuxRole ar = aux_role(g.epilogue);
    if (ar != AuxRole::None) {
      const bool mask = ar == AuxRole::ReluMaskInput || ar == AuxRole::ReluMaskOutput;
      // NOTE: the ReLU mask's leading dimension and batch stride are counted in bits.
      const std::int64_t unit = mask ? kBitsPerByte : 1;
      const std::int64_t ld = aux_leading_dimension(g, s.n) * unit;
      const std::int64_t bstride = batch_stride_of(g.aux) * unit;
      set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld, "EPILOGUE_AUX_LD");
      set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, bstride, "EPILOGUE_AUX_BATCH_STRIDE");
    }
    // Stored row-major [r, c] with row stride ld == column-major [c, r] with the same ld.
    auto make_layout = [&](Layout& l, const TensorView& t, cudaDataType_t type, const char* what) {
      check_cublas(cublasLtMatrixLayoutCreate(&l.h, type, static_cast<std::uint64_t>(cols_of(t)),
                                              static_cast<std::uint64_t>(rows_of(t)), leading_dimension(t)),
                   what);
      if (s.batch > 1) {
        const std::int32_t count = static_cast<std::int32_t>(s.batch);
        const std::int64_t stride = batch_stride_of(t);
        check_cublas(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), what);
        check_cublas(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                      sizeof(stride)), what);
      }
    };
    make_layout(p->a, g.b, to_cuda(g.b.dtype), "layout of b");
    make_layout(p->b, g.a, to_cuda(g.a.dtype), "layout of a");
    make_layout(p->d, g.d, to_cuda(g.d.dtype), "layout of d");
    const TensorView& c = g.c.empty() ? g.d : g.c;
    // NOTE: fp8 outputs need a 16-bit C type even when beta == 0 and C is never read.
    const cudaDataType_t c_type = !g.c.empty() ? to_cuda(g.c.dtype)
                                  : is_fp8(g.d.dtype) ? CUDA_R_16BF
                                                      : to_cuda(g.d.dtype);
    make_layout(p->c, c, c_type, "layout of c");
    if (fp8) {
      // Scale pointers must be set before the heuristic so it picks a kernel that applies them;
      // the values are re-set per call.
      set_fp8_pointers(*p, g);
    }
    // The heuristic reads the bias and aux pointers' alignment from their values (cublasLt.h),
    // which the plan key holds; the pointers themselves are re-set per call.
    set_vector_pointers(*p, g);

    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto v) {
      check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)), "preference");
    };
    set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_bytes));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(alignment_of(g.b)));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(alignment_of(g.a)));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(alignment_of(c)));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(alignment_of(g.d)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->a.h, p->b.h, p->c.h, p->d.h, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      throw Error(ErrorKind::Unsupported,
                  fmt::format("cuBLASLt has no algorithm for epilogue {} with a {} b {} d {}{}{} at "
                              "M={} N={} K={} batch={} trans_a={} trans_b={} (status {})",
                              epilogue_name(g.epilogue), g.a.describe(), g.b.describe(), g.d.describe(),
                              g.bias.empty() ? "" : fmt::format(" bias {}", g.bias.describe()),
                              g.aux.empty() ? "" : fmt::format(" aux {}", g.aux.describe()), s.m, s.n, s.k,
                              s.batch, g.trans_a == Transpose::Yes, g.trans_b == Transpose::Yes,
                              static_cast<int>(st)));
    }
    p->algo = result.algo;
    p->algorithm = algorithm_ids(result.algo);
    p->algo_workspace_bytes = result.workspaceSize;
    p->waves = result.wavesCount;
    return p;
  }

  static void set_vector_pointers(Plan& p, const GemmArgs& g) {
    if (!g.bias.empty()) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias.data, "BIAS_POINTER");
    if (!g.aux.empty()) set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux.data, "AUX_POINTER");
  }

  // NOTE: only non-null pointers are set: cuBLASLt rejects a matmul whose descriptor names a
  // D scale or amax it cannot apply (e.g. a D scale for a bf16 D), even when the pointer is null.
  // Which pointers are set is part of the plan key, so a cached plan never has a stale one.
  static void set_fp8_pointers(Plan& p, const GemmArgs& g) {
    // In cuBLASLt's terms A is our B: the scales swap with the operands.
    if (g.fp8.b_scale) set_desc(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, g.fp8.b_scale, "B_SCALE_POINTER");
    if (g.fp8.a_scale) set_desc(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, g.fp8.a_scale, "A_SCALE_POINTER");
    if (g.fp8.d_scale) set_desc(p.desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, g.fp8.d_scale, "D_SCALE_POINTER");
    if (g.fp8.amax_d) set_desc(p.desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, g.fp8.amax_d, "AMAX_D_POINTER");
  }
};

GemmHandle::GemmHandle(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  impl_->workspace_bytes = workspace_bytes;
}
GemmHandle::~GemmHandle() = default;
const GemmPlanInfo& GemmHandle::last_plan() const { return impl_->last; }
std::size_t GemmHandle::cached_plans() const { return impl_->plans.size(); }

void gemm(GemmHandle& handle, const GemmArgs& g, cudaStream_t stream) {
  const Shape s = validate(g);
  auto& h = handle.impl();
  h.ensure_ready();
  const PlanKey key = make_key(g, s);
  auto it = h.plans.find(key);
  const bool hit = it != h.plans.end();
  if (!hit) it = h.plans.emplace(key, h.build(g, s)).first;
  Plan& p = *it->second;

  GemmHandle::Impl::set_vector_pointers(p, g);
  if (is_fp8(g.a.dtype)) GemmHandle::Impl::set_fp8_pointers(p, g);

  // NOTE: C may alias D only with D's layout; an fp8 D has a 16-bit C layout, so without a C
  // (beta == 0, never read) no pointer is passed.
  const void* c_ptr = !g.c.empty() ? g.c.data : is_fp8(g.d.dtype) ? nullptr : g.d.data;
  check_cublas(cublasLtMatmul(h.lt, p.desc, &g.alpha, g.b.data, p.a.h, g.a.data, p.b.h, &g.beta, c_ptr, p.c.h,
                              g.d.data, p.d.h, &p.algo, h.workspace.data(), h.workspace.bytes(), stream),
               fmt::format("cublasLtMatmul (epilogue {})", epilogue_name(g.epilogue)));
  h.last = {std::string(epilogue_name(g.epilogue)), p.algorithm, p.algo_workspace_bytes, hit, p.waves};
}

std::string describe(const GemmPlanInfo& plan) {
  return fmt::format("cuBLASLt {}, {}, {} B workspace, {:.2f} waves", plan.epilogue, plan.algorithm,
                     plan.workspace_bytes, plan.heuristic_waves);
}

}  // namespace fusekit
