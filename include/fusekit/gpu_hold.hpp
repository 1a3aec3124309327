#pragma once
// A hold on a stream: one thread spins for a number of SM clock cycles. The benchmark harness
// enqueues it before a timed run's start event, so that the host's work in the call being timed
// (argument checks, TMA descriptors, the launch) happens while the GPU is still busy, and the
// events time the GPU's work alone; the host's share is measured apart (bench/harness.hpp).
// No fmt here: included by a .cu file.
#include <cuda_runtime_api.h>

namespace fusekit {

// Cycles of a benchmark's hold: about 0.2 ms at the H200's 2 GHz, more than the host's part of
// any call fusekit times (the attention forward's checks and TMA descriptors take the most).
inline constexpr long long kBenchHoldCycles = 400'000;

// Spins one thread for `cycles` clocks on `stream`. Returns the launch status.
cudaError_t launch_gpu_hold(long long cycles, cudaStream_t stream);

}  // namespace fusekit
