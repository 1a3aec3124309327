#pragma once
// The Hopper attention forward kernel (include/fusekit/device/attention/sm90_flash_forward.cuh),
// one explicit instantiation per head dim (src/attention/sm90_flash_forward_d*.cu, sm_90a only),
// each for bf16 and f16.
#include <cuda_runtime_api.h>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit::attention::sm90 {

// Extents of the tensors that are not in FlashForwardParams (TMA descriptors need them).
struct TensorExtents {
  int batch = 0;
  int heads_kv = 0;
};

// Builds the TMA descriptors of q, k and v and launches the persistent kernel for `kHeadDim` (at
// most one CTA per SM, and at most max_ctas ≥ 1, over the query tiles × heads_q × batch). Fixed
// lengths only; strides of q, k and v in 16-byte multiples; fewer than 2^31 query tiles.
template <int kHeadDim>
void launch_flash_forward(const device::attention::FlashForwardParams& params, const TensorExtents& extents,
                          DType dtype, int max_ctas, cudaStream_t stream);

}  // namespace fusekit::attention::sm90
