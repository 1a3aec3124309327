#pragma once
// Named barriers of the Hopper attention forward kernel and the pingpong schedule built on them.
//
// Pingpong: the two consumer warpgroups take turns issuing their wgmma batches. A warpgroup waits
// for its turn (bar.sync on its own barrier), issues the GEMMs of one key tile, then hands the
// turn to the other (bar.arrive on the other's barrier) and runs its softmax while the other's
// GEMMs occupy the tensor cores. Each bar.sync completes when the 128 threads waiting and the 128
// threads of the other warpgroup arriving have all reached it (256 in all).
//
// Balance (every arrival is consumed, none is left over at exit): both warpgroups issue the same
// N batches over the CTA's life (per query tile with n key tiles: S of tile 0; S of tile j with
// P·V of tile j − 1; P·V of the last tile) and hand over after each. Warpgroup 1 arrives once up
// front so that warpgroup 0 goes first, and warpgroup 0 syncs once more at the end: barrier 0
// sees 1 + N arrivals for N + 1 syncs, barrier 1 sees N arrivals for N syncs (N = 0 included).
#include <cutlass/arch/barrier.h>

#include "fusekit/device/attention/sm90_tile_shape.cuh"

namespace fusekit::device::attention::sm90 {

// User barrier ids (CUTLASS adds its reserved count); id 0 and 1 are the consumers' turns.
enum class NamedBarrierId : unsigned { ConsumerTurn0 = 0, ConsumerTurn1 = 1 };

inline constexpr unsigned kPingpongThreads = 2 * kWarpgroupThreads;

class Pingpong {
 public:
  __device__ explicit Pingpong(int consumer) : consumer_(consumer) {}
  __device__ int consumer() const { return consumer_; }

  // Warpgroup 1 lets warpgroup 0 issue first.
  __device__ void start() const {
    if (consumer_ == 1) cutlass::arch::NamedBarrier::arrive(kPingpongThreads, turn_of(0));
  }
  __device__ void wait_turn() const { cutlass::arch::NamedBarrier::sync(kPingpongThreads, turn_of(consumer_)); }
  __device__ void pass_turn() const { cutlass::arch::NamedBarrier::arrive(kPingpongThreads, turn_of(1 - consumer_)); }
  // After the CTA's last batch: warpgroup 0 takes the turn that warpgroup 1 handed over last.
  __device__ void finish() const {
    if (consumer_ == 0) wait_turn();
  }

 private:
  __device__ static unsigned turn_of(int consumer) {
    return static_cast<unsigned>(consumer == 0 ? NamedBarrierId::ConsumerTurn0 : NamedBarrierId::ConsumerTurn1);
  }
  int consumer_;
};

}  // namespace fusekit::device::attention::sm90
