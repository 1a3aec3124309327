#pragma once
// The portable attention forward kernels, one explicit instantiation per head dim
// (src/attention/flash_forward_d*.cu), each for bf16 and f16.
#include <cuda_runtime_api.h>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit::attention {

// Launches the kernel for `kHeadDim` over a grid of query tiles × heads_q × `sequences`.
template <int kHeadDim>
void launch_flash_forward(const device::attention::FlashForwardParams& params, DType dtype, int sequences,
                          cudaStream_t stream);

}  // namespace fusekit::attention
