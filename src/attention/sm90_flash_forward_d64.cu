// The Hopper attention forward kernel for head dim 64 (bf16 and f16; sm_90a only).
#include "sm90_flash_forward_launch.cuh"

namespace fusekit::attention::sm90 {
template void launch_flash_forward<64>(const device::attention::FlashForwardParams&, const TensorExtents&, DType,
                                      int, cudaStream_t);
}  // namespace fusekit::attention::sm90
