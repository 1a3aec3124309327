#pragma once
// The seeds' linear layer ladder: Y = gelu(X·Wᵀ + b), X [M,K], W [N,K], b [N], its residual
// variant Y = gelu(X·Wᵀ + b) + R, and the gated FFN up-projection Y = silu(X·W1ᵀ) ⊙ (X·W3ᵀ) with
// W1 and W3 concatenated into one [2N,K] weight, interleaved in blocks of kGateBlock rows (a
// one-off permutation of the checkpoint) so that a tile of the GEMM holds both halves of its
// output columns.
//   gemm         : the plain GEMM alone (the peer line: what the epilogue must not slow down)
//   unfused      : GEMM, then a bias kernel, then a GELU kernel [, then an add] (eager; baseline)
//   cublaslt     : Level 1, cuBLASLt's GELU_BIAS epilogue [, then an add kernel]
//   hopper       : Level 2, the CUTLASS Hopper kernel with the whole chain in its epilogue (sm_90)
//   swiglu ladder: gemm, unfused (GEMM, then the one-pass SwiGLU pointwise kernel: cuBLASLt has
//   no gated epilogue, so this is also the best composition of cuBLASLt calls), portable, and
//   hopper where the Hopper kernel has the chain.
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/dtype.hpp"
#include "fusekit/fused_gemm.hpp"

namespace fusekit::bench {

struct LinearShape {
  std::int64_t m, n, k;
};

// The four shapes of the first ladder (the seeds' 4096³, a large square, an FFN up-projection
// of a Llama-class model, and a long-batch projection).
inline constexpr LinearShape kLinearShapes[] = {
    {4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 14336, 4096}, {16384, 4096, 4096}};

// The swiglu ladder's shape (Llama-3-8B's FFN up-projection): Y [4096, 14336] from W [2·14336, 4096].
inline constexpr LinearShape kSwiGluShape{4096, 14336, 4096};  // n: the output's columns
// The Hopper kernel's gate block (gate and up are the two halves of its 256-column tile); the
// portable kernel and the pointwise chain take it too.
inline constexpr std::int64_t kGateBlock = kSm90GateBlock;

enum class LinearChain : std::uint8_t {
  BiasGelu,          // Y = gelu(X·Wᵀ + b)              ladder "linear"
  BiasGeluResidual,  // Y = gelu(X·Wᵀ + b) + R          ladder "residual"
  SwiGlu,            // Y = silu(X·W1ᵀ) ⊙ (X·W3ᵀ)       ladder "swiglu" (shape.n = columns of Y)
};

struct LinearOptions {
  LinearShape shape{4096, 4096, 4096};
  LinearChain chain = LinearChain::BiasGelu;
  DType dtype = DType::BF16;
  CheckScope scope = CheckScope::SampledRows;
  std::uint64_t seed = 0;  // 0: draw a fresh seed
};

// Builds the ladder (allocating and filling its tensors with fresh random data). The returned
// LadderRun owns everything its rungs use.
LadderRun make_linear_ladder(const LinearOptions& options);

}  // namespace fusekit::bench
