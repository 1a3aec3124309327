#pragma once
// A row's Σh and Σh² on the tensor cores (mma.sync), from the packed 16-bit chunks a warp holds,
// so the FP32 pipe is left the normalization: each thread's chunk of eight values is one A
// fragment.
//   Σh:  m16n8k16 against ones: row g of A (lane quad g's first and third words) and row g + 8
//        (its second and fourth) each sum into every column of C.
//   Σh²: m16n8k8 with the fragment's own rows as B: C = A·Aᵀ over quads, whose diagonal
//        C[g][g] (C[g + 8][g] for the second row) is quad g's Σh², held by lane 4g + g/2.
// Products of 16-bit values are exact in fp32; the sums round as the tensor core's fp32
// accumulation does.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fusekit/device/mma_sync.cuh"
#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

// A lane quad: the four lanes that hold one row of an mma.sync fragment.
inline constexpr int kQuadLanes = 4;

// 1.0 in both halves of a 32-bit word, as bf16 and as f16.
template <class T> inline constexpr std::uint32_t kPackedOnes = 0;
template <> inline constexpr std::uint32_t kPackedOnes<__nv_bfloat16> = 0x3F803F80u;
template <> inline constexpr std::uint32_t kPackedOnes<__half> = 0x3C003C00u;

// Every lane of the warp calls add() for the same chunks and partial() once: mma.sync is
// warp-wide. partial() is this lane's share of the warp's sums, so an all-reduce of the shares
// over the row's threads gives the row's Σh and Σh².
template <class T>
class MmaRowSums {
  static_assert(kPackedOnes<T> != 0, "16-bit values: bf16 or f16");
  static constexpr bool kBf16 = MmaType<T>::kBf16;
  static constexpr int kChunkElements = 8;

 public:
  // Σh and Σh² of the lane quad's chunks, added.
  __device__ __forceinline__ void add(const Pack<T, kChunkElements>& chunk) {
    const auto* word = reinterpret_cast<const std::uint32_t*>(&chunk);
    const unsigned a[4] = {word[0], word[1], word[2], word[3]};
    mma<kBf16>(sums_, a, kPackedOnes<T>, kPackedOnes<T>);
    // Rows g: the first and third words against themselves; rows g + 8: the second and fourth.
    mma_k8<kBf16>(top_, a[0], a[1], a[0]);
    mma_k8<kBf16>(bottom_, a[0], a[1], a[1]);
    mma_k8<kBf16>(top_, a[2], a[3], a[2]);
    mma_k8<kBf16>(bottom_, a[2], a[3], a[3]);
  }

  // {Σh, Σh²} of the lane's quad on lane 4g + g/2 of quad g, {0, 0} on the quad's other lanes.
  __device__ __forceinline__ SumPair partial() const {
    const int lane = static_cast<int>(threadIdx.x % kWarpThreads);
    const int quad = lane / kQuadLanes;
    if (lane % kQuadLanes != quad / 2) return {0.0f, 0.0f};
    const bool odd = quad % 2 != 0;
    return {sums_[0] + sums_[2], (odd ? top_[1] : top_[0]) + (odd ? bottom_[3] : bottom_[2])};
  }

 private:
  float sums_[4] = {};
  float top_[4] = {};
  float bottom_[4] = {};
};

}  // namespace fusekit::device
