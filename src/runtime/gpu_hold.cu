// The stream hold of fusekit/gpu_hold.hpp.
#include "fusekit/gpu_hold.hpp"

namespace fusekit {

namespace {
__global__ void gpu_hold_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
}  // namespace

cudaError_t launch_gpu_hold(long long cycles, cudaStream_t stream) {
  gpu_hold_kernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

}  // namespace fusekit
