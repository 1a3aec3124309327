#pragma once
// Definition of launch_flash_forward, included by one .cu file per head dim.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fusekit/device/attention/flash_forward.cuh"
#include "fusekit/error.hpp"
#include "flash_forward_launch.hpp"

namespace fusekit::attention {

namespace detail {

template <class T, int kHeadDim>
void launch(const device::attention::FlashForwardParams& p, int sequences, cudaStream_t stream) {
  using Shape = device::attention::FlashForwardShape<kHeadDim>;
  const auto kernel = device::attention::flash_forward_kernel<T, kHeadDim>;
  static const bool configured = [kernel] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSmemBytes),
               "cudaFuncSetAttribute (attention forward shared memory)");
    return true;
  }();
  (void)configured;
  const dim3 grid((p.seqlen_q + Shape::kBlockM - 1) / Shape::kBlockM, p.heads_q, sequences);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(p);
  check_launch("flash_forward_kernel");
}

}  // namespace detail

template <int kHeadDim>
void launch_flash_forward(const device::attention::FlashForwardParams& p, DType dtype, int sequences,
                          cudaStream_t stream) {
  if (dtype == DType::BF16) {
    detail::launch<__nv_bfloat16, kHeadDim>(p, sequences, stream);
  } else {
    detail::launch<__half, kHeadDim>(p, sequences, stream);
  }
}

}  // namespace fusekit::attention
