#pragma once
// The seeds' linear layer ladder: Y = gelu(X·Wᵀ + b), X [M,K], W [N,K], b [N], and its
// residual variant Y = gelu(X·Wᵀ + b) + R.
//   gemm         : the plain GEMM alone (the peer line: what the epilogue must not slow down)
//   unfused      : GEMM, then a bias kernel, then a GELU kernel [, then an add] (eager; baseline)
//   cublaslt     : Level 1, cuBLASLt's GELU_BIAS epilogue [, then an add kernel]
//   hopper       : Level 2, the CUTLASS Hopper kernel with the whole chain in its epilogue (sm_90)
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/harness.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit::bench {

struct LinearShape {
  std::int64_t m, n, k;
};

// The four shapes of the first ladder (the seeds' 4096³, a large square, an FFN up-projection
// of a Llama-class model, and a long-batch projection).
inline constexpr LinearShape kLinearShapes[] = {
    {4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 14336, 4096}, {16384, 4096, 4096}};

enum class LinearChain : std::uint8_t {
  BiasGelu,          // Y = gelu(X·Wᵀ + b)              ladder "linear"
  BiasGeluResidual,  // Y = gelu(X·Wᵀ + b) + R          ladder "residual"
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
