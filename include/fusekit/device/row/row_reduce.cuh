#pragma once
// All-reduce of one value over the threads that hold a row: warp shuffles, then (CTA-per-row
// layouts) the warps' partials through shared memory, then (clusters, sm_90+) the CTAs' partials
// through distributed shared memory. Every thread of the row gets the same bits: the partials
// are combined in a fixed order, so results are deterministic run to run.
#include <cooperative_groups.h>

#include <cmath>

#include "fusekit/device/row/row_config.hpp"

namespace fusekit::device {

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// A running softmax denominator: sum = Σ exp2(z − max) over the values seen.
struct MaxSum {
  float max;
  float sum;
};
// NOTE: a part whose max is −∞ has seen no visible value; its weight is 0, not exp2(−∞ + ∞).
__device__ inline float rescale(const MaxSum& part, float max) {
  return part.max == -INFINITY ? 0.0f : part.sum * exp2f(part.max - max);
}
struct MaxSumOp {
  __device__ MaxSum operator()(const MaxSum& a, const MaxSum& b) const {
    const float m = fmaxf(a.max, b.max);
    return {m, rescale(a, m) + rescale(b, m)};
  }
};

// Two sums reduced together (one synchronisation for both).
struct SumPair {
  float first;
  float second;
};
struct SumPairOp {
  __device__ SumPair operator()(const SumPair& a, const SumPair& b) const {
    return {a.first + b.first, a.second + b.second};
  }
};

constexpr unsigned kFullWarpMask = 0xFFFFFFFFu;

__device__ inline float shuffle_xor(float v, int mask) { return __shfl_xor_sync(kFullWarpMask, v, mask); }
__device__ inline MaxSum shuffle_xor(const MaxSum& v, int mask) {
  return {shuffle_xor(v.max, mask), shuffle_xor(v.sum, mask)};
}
__device__ inline SumPair shuffle_xor(const SumPair& v, int mask) {
  return {shuffle_xor(v.first, mask), shuffle_xor(v.second, mask)};
}

template <class V, class Op>
__device__ inline V warp_allreduce(V v, Op op) {
#pragma unroll
  for (int mask = kWarpThreads / 2; mask > 0; mask /= 2) v = op(v, shuffle_xor(v, mask));
  return v;
}

// The reduction of `v` over the row's threads (and its cluster's CTAs when cluster > 1). Each
// call site in a kernel takes its own kSlot, so its shared scratch is its own and no trailing
// barrier is needed before the next reduction.
template <class Config, int kSlot, class V, class Op>
__device__ inline V row_allreduce(V v, Op op, int cluster) {
  v = warp_allreduce(v, op);
  if constexpr (Config::kThreadsPerRow > kWarpThreads) {
    constexpr int kWarps = Config::kThreadsPerRow / kWarpThreads;
    __shared__ V partial[kWarps];
    if (threadIdx.x % kWarpThreads == 0) partial[threadIdx.x / kWarpThreads] = v;
    __syncthreads();
    v = partial[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v = op(v, partial[w]);
  }
  if constexpr (Config::kMaxCluster > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (cluster > 1) {
      __shared__ V cta_total;
      if (threadIdx.x == 0) cta_total = v;
      auto ctas = cooperative_groups::this_cluster();
      // NOTE: the barrier publishes every CTA's total (release/acquire) before any is read.
      ctas.sync();
      v = *ctas.map_shared_rank(&cta_total, 0);
      for (int r = 1; r < cluster; ++r) v = op(v, *ctas.map_shared_rank(&cta_total, r));
    }
#endif
  }
  return v;
}

// NOTE: a CTA's shared memory must outlive its peers' reads of it: every CTA of a cluster waits
// here before it exits.
template <class Config>
__device__ inline void cluster_finish(int cluster) {
  if constexpr (Config::kMaxCluster > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (cluster > 1) cooperative_groups::this_cluster().sync();
#endif
  }
}

// Whether this compilation of a kernel has a body: cluster-only layouts are never launched
// before sm_90 (the planner skips them), so their sm_80 build is left empty.
template <class Config>
__device__ constexpr bool layout_compiled() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  return Config::kClusterUse != ClusterUse::Only;
#else
  return true;
#endif
}

// Which row and which slice of it this thread holds.
template <class Config>
struct RowPosition {
  std::int64_t row;  // may be >= rows in the last CTA of a warp-per-row layout
  int t;             // thread within the row
  int begin;         // first column of this CTA's slice
  int cluster;       // CTAs per row

  __device__ static RowPosition of(int cluster, int slice) {
    const std::int64_t group = blockIdx.x / cluster;
    const int rank = static_cast<int>(blockIdx.x - group * cluster);
    return {group * Config::kRowsPerBlock + threadIdx.x / Config::kThreadsPerRow,
            static_cast<int>(threadIdx.x % Config::kThreadsPerRow), rank * slice, cluster};
  }
  __device__ bool leader() const { return t == 0 && begin == 0; }
};

}  // namespace fusekit::device
