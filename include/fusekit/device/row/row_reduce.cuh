#pragma once
// All-reduce of one value over the threads that hold a row: warp shuffles, then (CTA-per-row
// layouts) the warps' partials through shared memory, then (clusters, sm_90+) the CTAs' partials
// through distributed shared memory. Every thread of the row gets the same bits: the partials
// are combined in a fixed order, so results are deterministic run to run.
#include <cooperative_groups.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "fusekit/device/amax.cuh"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
  // identity(): the value that leaves any other unchanged (WarpCombine::Butterfly gives it to the
  // lanes past a row's warps).
  __device__ static float identity() { return 0.0f; }
};
// The max of magnitudes (non-negative floats or NaN: an amax, NaN kept; device/amax.cuh). A warp
// takes it in one integer redux (sm_80+) instead of five shuffles and five maxes.
struct AmaxOp {
  __device__ float operator()(float a, float b) const { return amax_join(a, b); }
  __device__ static float identity() { return 0.0f; }
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
  __device__ static SumPair identity() { return {0.0f, 0.0f}; }
};

// A sum and a max reduced together (RMSNorm's Σ h² and max |h·w| in one all-reduce).
struct SumMax {
  float sum;
  float max;
};
struct SumMaxOp {
  __device__ SumMax operator()(const SumMax& a, const SumMax& b) const { return {a.sum + b.sum, amax_join(a.max, b.max)}; }
  __device__ static SumMax identity() { return {0.0f, 0.0f}; }  // the max is of magnitudes
};

// A warp shuffle of each 32-bit word of v (the reduced values are floats or structs of them).
template <class V, class Shuffle>
__device__ __forceinline__ V shuffle_words(const V& v, Shuffle&& shuffle) {
  static_assert(sizeof(V) % sizeof(float) == 0 && std::is_trivially_copyable_v<V>, "whole 32-bit words");
  constexpr int kWords = sizeof(V) / sizeof(float);
  float words[kWords];
  memcpy(words, &v, sizeof(V));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = shuffle(words[w]);
  V out;
  memcpy(&out, words, sizeof(V));
  return out;
}
template <class V>
__device__ __forceinline__ V shuffle_xor(const V& v, int mask) {
  return shuffle_words(v, [&](float word) { return __shfl_xor_sync(kFullWarpMask, word, mask); });
}
template <class V>
__device__ __forceinline__ V shuffle_down(const V& v, int offset) {
  return shuffle_words(v, [&](float word) { return __shfl_down_sync(kFullWarpMask, word, offset); });
}
template <class V>
__device__ __forceinline__ V shuffle_from(const V& v, int lane) {
  return shuffle_words(v, [&](float word) { return __shfl_sync(kFullWarpMask, word, lane); });
}

// Cluster barrier halves (sm_90): every thread of every CTA of the cluster arrives once per
// phase, and waits for the phase before arriving again.
__device__ inline void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ inline void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ inline void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

// ⊕ of kParts consecutive partials in a fixed tree ((p0 ⊕ p1) ⊕ (p2 ⊕ p3) …), all loads first.
template <int kParts, class V, class Op>
__device__ __forceinline__ V combine_partials(const V* parts, Op op) {
  V v[kParts];
#pragma unroll
  for (int i = 0; i < kParts; ++i) v[i] = parts[i];
#pragma unroll
  for (int stride = 1; stride < kParts; stride *= 2) {
#pragma unroll
    for (int i = 0; i + stride < kParts; i += 2 * stride) v[i] = op(v[i], v[i + stride]);
  }
  return v[0];
}

// The reduction of `v` over the lanes of a warp that hold a row: xor butterflies within aligned
// groups of `layout.threads` lanes, so the rows that share a warp reduce apart.
// NOTE: every lane ends with the same bits: a butterfly step combines the same two values in
// every lane, only commuted, and the ops commute exactly.
template <class V, class Op>
__device__ __forceinline__ V warp_allreduce(V v, Op op, const RowLayout& layout) {
  if (layout.threads >= kWarpThreads) {
    // Rows of a warp or more (every 16-bit row of 256 columns and up) skip the per-step lane
    // test (LayerNorm → e4m3 +3 % at 32768×4096 bf16, session 12).
    if constexpr (std::is_same_v<Op, AmaxOp>) {
      v = warp_amax(v);
    } else {
#pragma unroll
      for (int mask = kWarpThreads / 2; mask > 0; mask /= 2) v = op(v, shuffle_xor(v, mask));
    }
  } else {
#pragma unroll
    for (int mask = kWarpThreads / 2; mask > 0; mask /= 2)
      if (mask < layout.threads) v = op(v, shuffle_xor(v, mask));
  }
  return v;
}

// How combine_row_warps combines the partials of rows of more than eight warps: a shuffle-down
// tree to lane 0 and a broadcast, in a counted loop (Tree), or an xor butterfly that leaves the
// total in every lane, with an amax in one redux (Butterfly: ~20 instructions per two-float
// reduction against ~57, but kernels at their register caps spill with it; ptxas sm_90a).
enum class WarpCombine { Tree, Butterfly };

// The reduction of the warps' totals `v` (each lane holding its warp's) over the `warps` warps of
// a row from warp `first`: each warp's total through `partial` (shared, a slot per warp of the
// CTA), combined by every thread of the row after `sync()`, the barrier its warps meet at.
template <WarpCombine kCombine = WarpCombine::Tree, class V, class Op, class Sync>
__device__ __forceinline__ V combine_row_warps(V v, Op op, int warps, int first, V* partial, Sync&& sync) {
  // NOTE: unsigned, so the divisions by the warp size are shifts and masks (as signed ints
  // they took a sign fix-up each: ~10 instructions per reduction, session 22).
  const auto warp = static_cast<int>(threadIdx.x / kWarpThreads);
  const auto lane = static_cast<int>(threadIdx.x % kWarpThreads);
  if (lane == 0) partial[warp] = v;
  sync();
  if constexpr (kCombine == WarpCombine::Butterfly && std::is_same_v<Op, AmaxOp>) {
    // 0 past the row's warps.
    return warp_amax(lane < warps ? partial[first + lane] : 0.0f);
  }
  // NOTE: the usual warp counts take independent loads and a fixed tree: the counted loop's
  // trip-count arithmetic and branches were ~20 instructions per reduction, and the quantizing
  // norms are issue-bound (RMSNorm → e4m3 +1.2 %, LayerNorm → e4m3 +1.0 % at 32768×4096 bf16,
  // session 12). A lane butterfly over the partials gained them less (two dependent shuffles).
  // Six warps (192-thread rows: 6144 16-bit columns at four chunks) take a fixed tree too:
  // LayerNorm → e4m3 at 6144 bf16 columns +6.8 % (session 22); twelve spilled norm_quantize_kernel.
  switch (warps) {
    case 2: return combine_partials<2>(partial + first, op);
    case 4: return combine_partials<4>(partial + first, op);
    case 6: return combine_partials<6>(partial + first, op);
    case 8: return combine_partials<8>(partial + first, op);
    default: {
      if constexpr (kCombine == WarpCombine::Butterfly) {
        // Lane l takes the partial of warp l mod 16 (of warp l past 16 warps), the op's identity
        // past the row's warps; every lane ends with the same bits (a step combines the same two
        // values in every lane, only commuted). Four steps up to 16 warps.
        constexpr int kHalfWarp = kWarpThreads / 2;
        const bool wide = warps > kHalfWarp;
        const int source = wide ? lane : lane % kHalfWarp;
        v = source < warps ? partial[first + source] : Op::identity();
        if (wide) v = op(v, shuffle_xor(v, kHalfWarp));
#pragma unroll
        for (int mask = kHalfWarp / 2; mask > 0; mask /= 2) v = op(v, shuffle_xor(v, mask));
        return v;
      }
      // NOTE: more warps (the long rows' CTAs of 512 and 1024 threads): lane l takes warp l's
      // partial, a fixed tree of shuffles brings the total to lane 0, and every lane takes it
      // from there. Each thread combining every partial in turn (31 shared loads and 62
      // dependent adds per warp of a 1024-thread row, while the SM's one CTA has no load in
      // flight) ran LayerNorm at 3.41 TB/s against 3.52, RMSNorm 3.71 against 3.80 at 65536
      // bf16 columns, and the norm backward at 65536 6 % slower (session 16). At 16 warps,
      // combine_partials<16> ran the norm backward 0.4–0.6 % slower than the tree (session 17).
      // The loop is not unrolled: unrolled, the sm_80 norm backward (128 registers) spilled.
      // Rows of 16 warps or fewer start at offset 8 (the step at 16 combined nothing: ~11 of
      // ~68 instructions per two-float reduction, ncu, session 27). WarpCombine::Butterfly
      // spilled 4–104 bytes in the float-affine persistent quantizing kernels at their register
      // caps, and so did its redux for the amax alone (ptxas sm_90a).
      v = partial[first + (lane < warps ? lane : 0)];
#pragma unroll 1
      for (int offset = warps > kWarpThreads / 2 ? kWarpThreads / 2 : kWarpThreads / 4; offset > 0; offset /= 2) {
        const V other = shuffle_down(v, offset);
        if (lane + offset < warps) v = op(v, other);  // lanes below `offset` hold their subtree's total
      }
      return shuffle_from(v, 0);
    }
  }
}

// The reduction of `v` over the row's threads (and its cluster's CTAs when the row is split):
// warp_allreduce, then (CTA-per-row layouts) combine_row_warps at __syncthreads, then (clusters)
// the CTAs' totals through distributed shared memory. Rows that share a warp (fewer than 32
// threads) shuffle together, and rows that share a CTA (64 threads) wait at one barrier, so all
// of them must call it together, under the same branches (layer_norm_moments makes its branch so).
template <int kSlot, class V, class Op>
__device__ inline V row_allreduce(V v, Op op, const RowLayout& layout) {
  v = warp_allreduce(v, op, layout);
  if (layout.threads > kWarpThreads) {
    const auto warps = static_cast<int>(static_cast<unsigned>(layout.threads) / kWarpThreads);
    // The row's warps are consecutive: from warp 0 with one row per CTA (rows of 128 threads or
    // more), else from a multiple of `warps`, a power of two (RowLayout::row_shift): a mask, not
    // the software division of a modulo (~25 instructions in every row's reduction, session 18).
    const auto warp = static_cast<int>(threadIdx.x / kWarpThreads);
    const int first = layout.rows_per_cta == 1 ? 0 : warp & ~(warps - 1);
    // Each call site in a kernel takes its own kSlot, so its shared scratch is its own and no
    // trailing barrier is needed before the next reduction.
    __shared__ V partial[kMaxRowThreads / kWarpThreads];
    v = combine_row_warps(v, op, warps, first, partial, [] { __syncthreads(); });
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (layout.cluster > 1) {
    // NOTE: each CTA pushes its total into every CTA's slot for it (thread r writes CTA r), and
    // after the barrier each reads only its own shared memory, so no CTA waits at its exit for
    // its peers to finish reading it (pulling the peers' totals did: every CTA of a row then held
    // its SM until the slowest one had stored its slice).
    __shared__ V cta_totals[kMaxNonPortableClusterCtas];
    auto ctas = cooperative_groups::this_cluster();
    const auto rank = static_cast<int>(ctas.block_rank());
    const auto thread = static_cast<int>(threadIdx.x);
    cluster_wait();  // every peer is running (cluster_begin) and done with its previous reduction
    if (thread < layout.cluster) *ctas.map_shared_rank(&cta_totals[rank], thread) = v;
    cluster_arrive_release();  // publishes the pushes
    cluster_wait();
    v = cta_totals[0];
    for (int r = 1; r < layout.cluster; ++r) v = op(v, cta_totals[r]);
    cluster_arrive_relaxed();  // for the next reduction's (or cluster_finish's) wait
  }
#endif
  return v;
}

// A row held by one group of whole warps among several of a CTA that run apart (persistent CTAs
// of row groups, each looping over its own rows): the group's warps meet at its own hardware
// barrier, so no group waits for another.
struct RowGroup {
  int barrier;     // kFirstGroupBarrier + the group's index
  int first_warp;  // the group's first warp in the CTA
};
inline constexpr int kFirstGroupBarrier = 1;  // barrier 0 is __syncthreads'
inline constexpr int kHardwareBarriers = 16;  // per CTA

// A barrier among the `threads` threads (whole warps) that use hardware barrier `id`.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The shared scratch of group_allreduce's call sites (kGroupSlots of them) for values of type V:
// one array, so a thread's addresses into every slot are one register and constant offsets (an
// array per slot made ptxas keep an address per slot live across the loop over rows, and spill).
inline constexpr int kGroupSlots = 8;
template <class V>
__device__ __forceinline__ V* group_partials() {
  __shared__ V partials[kGroupSlots][kMaxRowThreads / kWarpThreads];
  return partials[0];
}

// row_allreduce for a row of a RowGroup (at least a warp; no cluster) at call site kSlot, or
// kSlot + `later` (< kGroupSlots; chosen at run time, such as a loop's row parity: one copy of the
// reduction, where a branch between two call sites' instantiations compiled two).
template <int kSlot, WarpCombine kCombine, class V, class Op>
__device__ inline V group_allreduce(V v, Op op, const RowLayout& layout, const RowGroup& group, int later = 0) {
  static_assert(kSlot >= 0 && kSlot < kGroupSlots, "a slot of group_partials");
  v = warp_allreduce(v, op, layout);
  if (layout.threads > kWarpThreads) {
    const auto warps = static_cast<int>(static_cast<unsigned>(layout.threads) / kWarpThreads);
    v = combine_row_warps<kCombine>(v, op, warps, group.first_warp,
                                    group_partials<V>() + (kSlot + later) * (kMaxRowThreads / kWarpThreads),
                                    [&] { named_barrier_sync(group.barrier, layout.threads); });
  }
  return v;
}

// Kernels whose rows may span a cluster call cluster_begin first and cluster_finish last: the
// barrier phase that cluster_begin opens tells the first reduction that every peer is running
// (distributed shared memory may be written only then), and the phase the last reduction opens
// is closed before the CTA exits.
__device__ inline void cluster_begin(const RowLayout& layout) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (layout.cluster > 1) cluster_arrive_relaxed();
#endif
}
__device__ inline void cluster_finish(const RowLayout& layout) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (layout.cluster > 1) cluster_wait();
#endif
}

// Which row and which slice of it this thread holds: CTA (or cluster) g holds row group g.
struct RowPosition {
  std::int64_t row;  // may be >= rows in the last CTA when rows share a CTA
  RowSlot slot;

  __device__ static RowPosition of(const RowLayout& layout) {
    // NOTE: the divisions are skipped where the layout makes them trivial (no cluster, one row
    // per CTA: every row of 1024 columns or more), as they are a row's whole prologue.
    const auto block = static_cast<int>(blockIdx.x);
    const int group = layout.cluster == 1 ? block : block / layout.cluster;
    const int rank = block - group * layout.cluster;
    const auto thread = static_cast<int>(threadIdx.x);
    const int within = layout.rows_per_cta == 1 ? 0 : thread >> layout.row_shift;
    return {std::int64_t{group} * layout.rows_per_cta + within,
            {rank * layout.slice, thread - within * layout.threads, layout.threads}};
  }
  __device__ bool leader() const { return slot.t == 0 && slot.begin == 0; }
  // The row's address index (a row past the end reads row 0 and writes nothing).
  __device__ std::int64_t address(std::int64_t rows) const { return row < rows ? row : 0; }
};

}  // namespace fusekit::device
