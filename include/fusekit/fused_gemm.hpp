#pragma once
// Level 2 of the seeds: a GEMM with any epilogue a transformer layer needs, fused.
//   D[M, N_out] = epilogue(op(A)[M,K] · op(B)[K,N])   with the chain of fusekit/epilogue.hpp
// A is row-major [M,K]; B is row-major [N,K] (a linear layer's weight: D = epilogue(A·Bᵀ)).
// fused_gemm() picks the backend: cuBLASLt when its fixed epilogue list has the chain, the
// Hopper CUTLASS kernel on sm_90 when it has the chain compiled, the portable kernel for any
// other chain, and reports which one ran and why.
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "fusekit/epilogue.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit {

enum class GemmBackend : std::uint8_t {
  Auto,      // the fastest that implements the chain
  CublasLt,  // cuBLASLt with one of its 16 epilogues (only chains that map onto one)
  Sm90,      // CUTLASS 3 warp-specialized TMA kernel with an epilogue visitor tree (sm_90)
  Portable,  // fusekit's mma.sync kernel: any chain, sm_80 and newer
};
std::string_view gemm_backend_name(GemmBackend b);

// How the Hopper kernel splits a tile between its two consumer warpgroups.
enum class Sm90Schedule : std::uint8_t {
  Auto,         // Deferred for the residual chain at K >= 4096 over >= 8 tiles an SM, else Cooperative
                // (faster than Pingpong at every ladder shape; docs/performance.md)
  Cooperative,  // both warpgroups on one 128×256 tile
  Pingpong,     // one 128×128 tile each, alternating: one's epilogue hides under the other's MMAs
  Deferred,     // Cooperative's tile, handed to three producer warps that apply the activation and
                // residual under the next tile's mainloop (bias → GELU chains only)
};

// The gate block of the Hopper kernel's gated chains: EpilogueSpec{}.swiglu(kSm90GateBlock) and
// .geglu(kSm90GateBlock) run on it. Its 128×256 tile holds 128 gate columns and their 128 up
// columns, so W interleaves W_gate and W_up in blocks of 128 rows (docs/hopper_swiglu.md).
inline constexpr std::int64_t kSm90GateBlock = 128;

struct FusedGemmArgs {
  TensorView a;  // [M,K]
  TensorView b;  // [N,K]
  TensorView d;  // [M, epilogue_output_columns(N)]
  EpilogueSpec epilogue;
  EpilogueTensors tensors;
  Sm90Schedule schedule = Sm90Schedule::Auto;  // the Hopper kernel only
};

struct FusedGemmReport {
  GemmBackend backend = GemmBackend::Auto;
  std::string reason;                         // why this backend (and, for Sm90, this schedule)
  Sm90Schedule schedule = Sm90Schedule::Auto;  // the Hopper kernel's schedule; Auto for other backends
};

// Owns the backends' state: the cuBLASLt handle and plan cache, CUTLASS workspaces.
class FusedGemmHandle {
 public:
  FusedGemmHandle();
  ~FusedGemmHandle();
  FusedGemmHandle(const FusedGemmHandle&) = delete;
  FusedGemmHandle& operator=(const FusedGemmHandle&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Checks every argument fused_gemm checks without a device (InvalidArgument naming it), then says
// which backend `fused_gemm` would run and why (no launch). Where the tensors lie is not asked:
// a plan reads no memory. A requested backend that cannot run them is ErrorKind::Unsupported.
FusedGemmReport plan_fused_gemm(const FusedGemmArgs& args, GemmBackend requested = GemmBackend::Auto);

// Validates every argument, then launches one fused kernel. Throws fusekit::Error before any
// launch on bad input, and ErrorKind::Unsupported when the requested backend cannot run it.
FusedGemmReport fused_gemm(FusedGemmHandle& handle, const FusedGemmArgs& args,
                           GemmBackend requested = GemmBackend::Auto, cudaStream_t stream = nullptr);

}  // namespace fusekit
