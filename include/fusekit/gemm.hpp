#pragma once
// Level 1 of the seeds: GEMM with cuBLASLt's fused epilogues.
//
// All matrices are row-major views (rank 2, or rank 3 for strided batches):
//   D[M,N] = epilogue(alpha · op(A)[M,K] · op(B)[K,N] + beta · C[M,N])
// op(A) = A (stored [M,K]) or Aᵀ (stored [K,M]); op(B) = B (stored [K,N]) or Bᵀ (stored [N,K]).
// A linear layer Y = X·Wᵀ is a = X [M,K], b = W [N,K], trans_b = Transpose::Yes.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "fusekit/tensor.hpp"

namespace fusekit {

// The 16 epilogues of cublasLtEpilogue_t in CUDA 13, in fusekit's row-major terms.
// acc = alpha·op(A)·op(B) + beta·C;  gelu is the tanh form;  bias is per column (length N).
enum class Epilogue : std::uint8_t {
  Default,      // D = acc
  Relu,         // D = relu(acc)
  ReluAux,      // D = relu(acc);        aux = bit mask (acc > 0)
  Bias,         // D = acc + bias
  ReluBias,     // D = relu(acc + bias)
  ReluAuxBias,  // D = relu(acc + bias); aux = bit mask (acc + bias > 0)
  DRelu,        // D = acc · [aux bit set]                       (ReLU backward)
  DReluBGrad,   // D = acc · [aux bit set];  bias_grad[j] = Σ_i D[i,j]
  Gelu,         // D = gelu(acc)
  GeluAux,      // D = gelu(acc);         aux = acc
  GeluBias,     // D = gelu(acc + bias)
  GeluAuxBias,  // D = gelu(acc + bias);  aux = acc + bias
  DGelu,        // D = acc · gelu'(aux)                          (GELU backward)
  DGeluBGrad,   // D = acc · gelu'(aux);  bias_grad[j] = Σ_i D[i,j]
  BGradA,       // D = acc;  bias_grad[i] = Σ_k op(A)[i,k]       (length M)
  BGradB,       // D = acc;  bias_grad[j] = Σ_k op(B)[k,j]       (length N)
};

inline constexpr Epilogue kAllEpilogues[] = {
    Epilogue::Default,     Epilogue::Relu,       Epilogue::ReluAux,  Epilogue::Bias,
    Epilogue::ReluBias,    Epilogue::ReluAuxBias, Epilogue::DRelu,   Epilogue::DReluBGrad,
    Epilogue::Gelu,        Epilogue::GeluAux,    Epilogue::GeluBias, Epilogue::GeluAuxBias,
    Epilogue::DGelu,       Epilogue::DGeluBGrad, Epilogue::BGradA,   Epilogue::BGradB};

std::string_view epilogue_name(Epilogue e);  // "GELU_BIAS", as cuBLASLt spells it
Epilogue parse_epilogue(std::string_view name);

// What an epilogue reads and writes besides A, B, C and D.
enum class BiasRole : std::uint8_t { None, Input, GradOutput };
enum class AuxRole : std::uint8_t { None, ReluMaskOutput, ReluMaskInput, PreactOutput, PreactInput };
BiasRole bias_role(Epilogue e);
AuxRole aux_role(Epilogue e);
// Length of the bias (or bias gradient) vector for an M×N result.
std::int64_t bias_length(Epilogue e, std::int64_t m, std::int64_t n);
// Bytes per row of a ReLU bit-mask aux for N columns (cuBLASLt needs rows of 128-bit multiples).
std::int64_t relu_mask_row_bytes(std::int64_t n);
// cuBLASLt takes a GELU pre-activation aux whose row stride (and batch stride) is a multiple of
// this many elements.
inline constexpr std::int64_t kPreactAuxLdMultiple = 8;

enum class Transpose : std::uint8_t { No, Yes };

// fp8 (e4m3/e5m2) inputs: per-tensor scales, each one float in device memory at a 16-byte
// aligned address. D = epilogue(a_scale·b_scale·alpha·op(A)·op(B) + beta·C) [· d_scale when D
// is fp8]; amax_d (fp8 D only) receives max|D| before the d_scale. All optional.
struct Fp8Scales {
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  const float* d_scale = nullptr;
  float* amax_d = nullptr;
};

struct GemmArgs {
  TensorView a, b;
  TensorView c;  // optional: read only when beta != 0; may alias d
  TensorView d;
  Transpose trans_a = Transpose::No;
  Transpose trans_b = Transpose::No;
  float alpha = 1.0f;
  float beta = 0.0f;
  Epilogue epilogue = Epilogue::Default;
  TensorView bias;  // [len] (rank 1) or [batch, len]: input for *_BIAS, output for *_BGRAD*
  TensorView aux;   // [M,N] pre-activation (dtype of D) or [M, relu_mask_row_bytes(N)] u8 mask
  Fp8Scales fp8;
};

// Which cuBLASLt algorithm the last call ran: what a benchmark reports beside its time.
struct GemmPlanInfo {
  std::string epilogue;             // cuBLASLt's name
  std::string algorithm;            // the heuristic's choice by cuBLASLt's configuration ids
  std::size_t workspace_bytes = 0;  // what the algorithm uses of the handle's workspace
  bool cache_hit = false;           // the plan came from the handle's cache (no heuristic call)
  float heuristic_waves = 0;        // cuBLASLt's estimate of waves for the chosen algorithm
};

// One line for a log: "cuBLASLt GELU_BIAS, algo 66 tile 23 …, 0 B workspace, 3.88 waves".
std::string describe(const GemmPlanInfo& plan);

// Owns the cuBLASLt handle, its workspace and the cache of heuristic results keyed by
// (shape, dtypes, epilogue, layout, alignment). Not thread-safe: one handle per thread.
class GemmHandle {
 public:
  explicit GemmHandle(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmHandle();
  GemmHandle(const GemmHandle&) = delete;
  GemmHandle& operator=(const GemmHandle&) = delete;

  // NOTE: 32 MiB is what NVIDIA recommends for Hopper kernels of cuBLASLt.
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  const GemmPlanInfo& last_plan() const;
  std::size_t cached_plans() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Validates every argument (shapes, dtypes, strides, alignment, pointers, device) and then
// launches one fused cuBLASLt GEMM on `stream`. Throws fusekit::Error before any launch.
void gemm(GemmHandle& handle, const GemmArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
