#pragma once
// Host entry to the portable mma.sync kernel (portable_gemm.cu). Internal to src/gemm.
#include <string>

#include <cuda_runtime_api.h>

#include "fusekit/fused_gemm.hpp"

namespace fusekit::portable {

// Why the portable kernel cannot run these (already validated) arguments, or "" when it can.
std::string blocker(const FusedGemmArgs& args);
void run(const FusedGemmArgs& args, cudaStream_t stream);

}  // namespace fusekit::portable
