#pragma once
// The L2 sweep that empties the cache between measured kernels: the profiler's flush before each
// profiled kernel (verify.hpp) and the benchmark harness's before each timed run. It only reads,
// so it leaves L2 full of clean lines: the next kernel pays no write-back of someone else's
// dirty data. No fmt here: included by a .cu file.
#include <cuda_runtime_api.h>

#include <cstddef>

namespace fusekit {

// Sweep blocks per SM: enough loads in flight to read the buffer at near-copy speed.
inline constexpr int kL2SweepBlocksPerSm = 8;

// The sweep kernel's name as CUPTI reports it (extern "C": not mangled).
inline constexpr const char* kL2SweepKernel = "fusekit_l2_sweep";

// Reads `bytes` (a multiple of 16) of the zero-filled `buffer` once, through L2, on `stream`;
// writes nothing (`sink` only ever receives a value the zeros cannot produce). Returns the
// launch status rather than throwing: the profiler calls it from inside a CUPTI callback.
cudaError_t launch_l2_sweep(const void* buffer, std::size_t bytes, unsigned int* sink, int blocks,
                            cudaStream_t stream);

}  // namespace fusekit
