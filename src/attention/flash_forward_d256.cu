// The portable attention forward kernel for head dim 256 (bf16 and f16).
#include "flash_forward_launch.cuh"

namespace fusekit::attention {
template void launch_flash_forward<256>(const device::attention::FlashForwardParams&, DType, int, cudaStream_t);
}  // namespace fusekit::attention
