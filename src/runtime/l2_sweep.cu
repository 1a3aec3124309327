// The L2 sweep: a read-only pass over a buffer several times the L2's size.
#include <cstdint>

#include "fusekit/l2_sweep.hpp"

namespace fusekit {

namespace {
constexpr int kSweepThreads = 256;
constexpr std::size_t kVectorBytes = sizeof(uint4);
constexpr unsigned int kImpossible = 1;  // the XOR of zero words is 0, never 1
}  // namespace

// NOTE: reads only. Evicting clean lines writes nothing back, so every DRAM write counted in a
// sweep's range is a dirty line left in L2 by the kernel before it. The loads feed a value that
// is stored only if it equals one the data cannot produce, which keeps them alive.
extern "C" __global__ void fusekit_l2_sweep(const uint4* __restrict__ data, std::size_t count,
                                            unsigned int impossible, unsigned int* sink) {
  unsigned int acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == impossible) *sink = acc;
}

cudaError_t launch_l2_sweep(const void* buffer, std::size_t bytes, unsigned int* sink, int blocks,
                            cudaStream_t stream) {
  fusekit_l2_sweep<<<blocks, kSweepThreads, 0, stream>>>(static_cast<const uint4*>(buffer),
                                                         bytes / kVectorBytes, kImpossible, sink);
  return cudaGetLastError();
}

}  // namespace fusekit
