// Launcher of the portable Level-2 GEMM (include/fusekit/device/gemm/mma_sync_gemm.cuh).
#include <string>

#include "fusekit/device/gemm/mma_sync_gemm.cuh"
#include "fusekit/error.hpp"
#include "../epilogue/device_chain.hpp"
#include "portable_gemm.hpp"

namespace fusekit::portable {

namespace {

using namespace fusekit::device::portable;
constexpr std::size_t kAlignBytes = 16;

// Whether t's address and row stride are multiples of `bytes`.
bool aligned_rows(const TensorView& t, std::size_t bytes) {
  const auto b = static_cast<std::int64_t>(bytes);
  return t.empty() || (reinterpret_cast<std::uintptr_t>(t.data) % bytes == 0 &&
                       (t.rank < 2 || (t.strides[0] * static_cast<std::int64_t>(t.element_size())) % b == 0));
}

template <class T>
void launch(const FusedGemmArgs& g, cudaStream_t stream) {
  Params p{g.a.data, g.a.strides[0], g.b.data, g.b.strides[0], g.d.data, g.d.strides[0],
           static_cast<int>(g.a.shape[0]), static_cast<int>(g.b.shape[0]), static_cast<int>(g.a.shape[1]),
           epilogue::make_device_chain(g.epilogue, g.tensors, g.a.dtype),
           g.epilogue.uses(EpilogueOp::QuantizeE4M3) ? Output::E4M3 : Output::Same};
  static const bool configured = [] {
    check_cuda(cudaFuncSetAttribute(gemm_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
               "cudaFuncSetAttribute (portable GEMM shared memory)");
    return true;
  }();
  (void)configured;
  const int tiles = ((p.m + kBlockM - 1) / kBlockM) * ((p.n + kBlockN - 1) / kBlockN);
  gemm_kernel<T><<<tiles, kThreads, kSmemBytes, stream>>>(p);
  check_launch("portable gemm_kernel");
}

}  // namespace

std::string blocker(const FusedGemmArgs& g) {
  constexpr std::int64_t kElemsPer16B = 8;
  if (g.a.shape[1] % kElemsPer16B != 0) return "the portable kernel needs K to be a multiple of 8";
  for (auto [name, t] : {std::pair{"a", &g.a}, {"b", &g.b}, {"bias", &g.tensors.bias}, {"residual", &g.tensors.residual},
                         {"source", &g.tensors.source}, {"aux", &g.tensors.aux}})
    if (!aligned_rows(*t, kAlignBytes)) return std::string("the portable kernel needs 16-byte aligned rows; ") + name + " is not";
  // D is stored a chunk of 8 outputs at a time: 16 bytes, or 8 of e4m3.
  if (const std::size_t chunk = kElemsPer16B * g.d.element_size(); !aligned_rows(g.d, chunk))
    return "the portable kernel needs D's rows aligned to " + std::to_string(chunk) + " bytes (8 outputs)";
  if (g.epilogue.nodes.size() > static_cast<std::size_t>(device::kMaxChainNodes))
    return "the portable kernel takes chains of at most 8 nodes";
  if (const std::int64_t block = g.epilogue.gate_block();
      g.epilogue.gated() && kHalfN % block != 0 && block % kHalfN != 0)
    return "the portable kernel needs a gate block dividing 64 or a multiple of 64 (half its 128-column tile)";
  if (g.a.shape[0] > INT32_MAX || g.b.shape[0] > INT32_MAX || g.a.shape[1] > INT32_MAX)
    return "the portable kernel indexes M, N, K with 32-bit integers";
  // A and B are addressed with 32-bit element offsets, up to a tile's rows past the last (and,
  // gated, one gate block further on).
  const std::int64_t slack = 2 * kBlockM + (g.epilogue.gated() ? g.epilogue.gate_block() : 0);
  if ((g.a.shape[0] + slack) * g.a.strides[0] + g.a.shape[1] > INT32_MAX ||
      (g.b.shape[0] + slack) * g.b.strides[0] + g.b.shape[1] > INT32_MAX)
    return "the portable kernel addresses A and B with 32-bit element offsets: rows × row stride must stay under 2^31";
  return "";
}

void run(const FusedGemmArgs& g, cudaStream_t stream) {
  switch (g.a.dtype) {
    case DType::BF16: return launch<__nv_bfloat16>(g, stream);
    case DType::F16: return launch<__half>(g, stream);
    default: throw_invalid("a dtype", "bf16 or f16", dtype_name(g.a.dtype));
  }
}

}  // namespace fusekit::portable
