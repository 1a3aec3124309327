#pragma once
// The row loop of persistent kernels whose rows are split over a thread-block cluster (sm_90):
// the block of rows a CTA group takes, and the exchange of the rows' sums between the cluster's
// CTAs without a cluster barrier per row.
//
// The rows go in groups of a few; a CTA pushes its sums of a group into a slot of every peer by
// st.async, which completes the transaction count of that peer's mbarrier for the slot, and then
// sums the next group's rows while those pushes travel: it waits for a group's totals only when it
// writes that group's outputs. A cluster barrier per row (row_allreduce) stalled every CTA on its
// slowest peer twice per row.
// NOTE: measured on the H200 (session 19, LayerNorm backward bf16, GB/s): at 16384 / 32768 /
// 65536 columns a cluster barrier per row ran 2358 / 2174 / 2013, one per 4 rows 2658 / 2425 /
// 2313, these pushes 3321 / 3006 / 2816.
#include <cooperative_groups.h>
#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/util.hpp>
#include <cutlass/arch/barrier.h>

#include <cstdint>
#include <cstring>

#include "fusekit/device/row/row_config.hpp"
#include "fusekit/device/row/row_reduce.cuh"

namespace fusekit::device {

// The block of row steps a CTA group (a CTA, or a cluster for split rows) loops over:
// [first, first + count), steps_per_group consecutive steps of `steps` in all.
// NOTE: 32-bit step and row arithmetic (rows < 2^32, the launchers check), to spare registers.
struct RowBlock {
  int group;
  std::uint32_t first;
  int count;

  __device__ static RowBlock of(std::int64_t steps, std::int64_t steps_per_group, const RowLayout& layout) {
    const int group = static_cast<int>(blockIdx.x) / layout.cluster;
    const auto first = static_cast<std::uint32_t>(group * steps_per_group);
    const auto end = static_cast<std::uint32_t>(first + steps_per_group < steps ? first + steps_per_group : steps);
    return {group, first, static_cast<int>(end - first)};
  }
  // Step k of the block (the row, where a step is one row).
  __device__ std::int64_t step(int k) const { return std::int64_t{first + static_cast<std::uint32_t>(k)}; }
};

// Clusters of two-chunk CTAs (LoopingTwoTensorRows) up to this size; rows they split over larger
// clusters, or do not hold, take four-chunk CTAs (WideClusterRows): an H200 holds clusters of 2
// on all 132 SMs, of 4 and 8 on 120 (session 19).
inline constexpr int kMaxTwoChunkCluster = 2;
// Whether clustered rows whose two-chunk layout is `two` run on WideClusterRows instead.
__host__ __device__ constexpr bool takes_wide_clusters(const RowLayout& two) {
  return !two.valid() || two.cluster > kMaxTwoChunkCluster;
}

// Groups of rows staged per CTA by the clustered loops: the one whose outputs are written, the
// one being summed, the one loading.
inline constexpr int kExchangeGroupsStaged = 3;
// Slots in flight per CTA: a CTA pushes group g + 4 into slot g % 4 of a peer only after its own
// wait for group g + 2, which that peer's push of g + 2 completed, and the peer pushes g + 2
// only after reading its totals of group g: four slots never overwrite unread sums.
inline constexpr int kExchangeSlots = 4;

// The sums of a group of kRows rows (one V per row), and their ⊕ row by row.
template <class V, int kRows>
struct GroupSums {
  V row[kRows];
};
template <class Op>
struct GroupSumsOp {
  template <class V, int kRows>
  __device__ GroupSums<V, kRows> operator()(const GroupSums<V, kRows>& a, const GroupSums<V, kRows>& b) const {
    GroupSums<V, kRows> s;
#pragma unroll
    for (int j = 0; j < kRows; ++j) s.row[j] = Op{}(a.row[j], b.row[j]);
    return s;
  }
};

// One CTA's side of the exchange, a __shared__ object of the kernel: every thread of the CTA
// calls start() once, then push(g) and totals(g) for g = 0, 1, … in order, push(g + 1) before
// totals(g).
// NOTE: no cluster barrier is needed at the exit: a CTA has waited for every push into it.
template <class Sums, class Op>
struct ClusterExchange {
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  static constexpr int kWords = sizeof(Sums) / sizeof(std::uint32_t);
  static_assert(sizeof(Sums) % sizeof(std::uint32_t) == 0, "pushed as 32-bit words");

  typename Barrier::ValueType pushed[kExchangeSlots];
  Sums received[kExchangeSlots][kMaxNonPortableClusterCtas];  // [slot][sender's rank]
  Sums warp_sums[2][kMaxRowThreads / kWarpThreads];           // [group % 2][warp]

  // Initialises the mbarriers and synchronises the cluster once (every peer runs, its mbarriers
  // initialised, before the first push); returns the CTA's rank in the cluster.
  __device__ int start() {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < kExchangeSlots; ++s) Barrier::init(&pushed[s], 1);  // this CTA's expect_tx
      cutlass::arch::fence_barrier_init();
    }
    auto cluster = cooperative_groups::this_cluster();
    cluster.sync();
    return static_cast<int>(cluster.block_rank());
  }

  // The CTA's sums of group g (warp butterflies, then warp 0 over the warps' partials, in a fixed
  // order), pushed by lane r of warp 0 into slot g % kExchangeSlots of CTA r for this CTA's rank.
  __device__ void push(int g, Sums part, const RowLayout& layout, int rank) {
    // NOTE: signed warp and lane here, unlike row_reduce's: the unsigned shift and mask changed
    // ptxas's schedule of the backward's cluster kernels (8 instructions more in the four-chunk
    // one) and ran the norm backward 1.6–1.9 % slower at 16384, 65536 and 131072 bf16 columns
    // (H200, session 30: LayerNorm backward 3150 → 3209 GB/s at 65536 with these).
    const auto thread = static_cast<int>(threadIdx.x);
    const int warp = thread / kWarpThreads, lane = thread % kWarpThreads;
#pragma unroll
    for (int mask = kWarpThreads / 2; mask > 0; mask /= 2) part = Op{}(part, shuffle_xor(part, mask));
    Sums* partials = warp_sums[g % 2];
    if (lane == 0) partials[warp] = part;
    __syncthreads();
    if (warp != 0) return;
    part = lane < layout.threads / kWarpThreads ? partials[lane] : Sums{};
#pragma unroll
    for (int mask = kWarpThreads / 2; mask > 0; mask /= 2) part = Op{}(part, shuffle_xor(part, mask));
    const int slot = g % kExchangeSlots;
    if (lane < layout.cluster) {
      std::uint32_t words[kWords];
      memcpy(words, &part, sizeof(Sums));
      const auto to = cute::cast_smem_ptr_to_uint(&received[slot][rank]);
      const auto barrier = cute::cast_smem_ptr_to_uint(&pushed[slot]);
#pragma unroll
      for (int q = 0; q < kWords; ++q)
        cute::store_shared_remote(words[q], to + q * static_cast<std::uint32_t>(sizeof(std::uint32_t)), barrier, lane);
    }
    if (lane == 0) Barrier::arrive_and_expect_tx(&pushed[slot], layout.cluster * sizeof(Sums));
  }

  // Group g's totals over the cluster, its CTAs' sums added in rank order (the same bits in each).
  __device__ Sums totals(int g, int cluster) {
    const int slot = g % kExchangeSlots;
    Barrier::wait(&pushed[slot], (g / kExchangeSlots) % 2);
    Sums total = received[slot][0];
    for (int r = 1; r < cluster; ++r) total = Op{}(total, received[slot][r]);
    return total;
  }
};

// The cluster half of the all-reduces of a row split over a cluster's CTAs, one row group per CTA,
// every row's reduction waited for before the next (norm_quantize_persistent_kernel): each CTA
// pushes its total (its group's all-reduce) into every CTA's slot for its rank by st.async onto
// that CTA's mbarrier of the slot, then waits on its own for every rank's push and adds them in
// rank order (the same bits in each CTA, so the CTAs branch alike on the totals). A __shared__
// object of the kernel; `phases` is the caller's register of the slots' mbarrier phases.
// NOTE: the caller's call site s of a row takes slot s + (its number of sites) · (row parity): a
// CTA pushes a slot's next use (two rows on) only after waiting for every peer's pushes of the row
// between, which each peer made after its group's barrier at that row, so after all of its threads
// read the slot's last use. Rows whose call sites are too few to order this (one site) still
// alternate parities.
template <int kSlots, int kWords>
struct ClusterAllReduce {
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  typename Barrier::ValueType pushed[kSlots];
  std::uint32_t received[kSlots][kMaxClusterCtas][kWords];  // [slot][sender's rank]

  // Initialises the mbarriers and synchronises the cluster once (every peer's mbarriers
  // initialised before the first push).
  __device__ void start() {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) Barrier::init(&pushed[s], 1);  // this CTA's expect_tx
      cutlass::arch::fence_barrier_init();
    }
    cooperative_groups::this_cluster().sync();
  }

  // The ⊕ over the cluster of every CTA's `total` (the same in each of its threads) at `slot`.
  template <class V, class Op>
  __device__ V allreduce(int slot, V total, Op op, int rank, int cluster, std::uint32_t& phases) {
    push(slot, total, rank, cluster);
    return wait<V>(slot, op, cluster, phases);
  }

  // allreduce in two halves, so a CTA may work between them: push sends this CTA's `total` to
  // every peer's `slot`, wait returns the ⊕ of every rank's push there.
  template <class V>
  __device__ void push(int slot, V total, int rank, int cluster) {
    static_assert(sizeof(V) % sizeof(std::uint32_t) == 0 && sizeof(V) <= kWords * sizeof(std::uint32_t),
                  "pushed as up to kWords 32-bit words");
    constexpr int kValueWords = sizeof(V) / sizeof(std::uint32_t);
    const auto thread = static_cast<int>(threadIdx.x);
    if (thread < cluster) {
      std::uint32_t words[kValueWords];
      memcpy(words, &total, sizeof(V));
      const auto to = cute::cast_smem_ptr_to_uint(&received[slot][rank][0]);
      const auto barrier = cute::cast_smem_ptr_to_uint(&pushed[slot]);
#pragma unroll
      for (int q = 0; q < kValueWords; ++q)
        cute::store_shared_remote(words[q], to + q * static_cast<std::uint32_t>(sizeof(std::uint32_t)), barrier,
                                  static_cast<std::uint32_t>(thread));
    }
    if (thread == 0) Barrier::arrive_and_expect_tx(&pushed[slot], static_cast<std::uint32_t>(cluster * sizeof(V)));
  }
  template <class V, class Op>
  __device__ V wait(int slot, Op op, int cluster, std::uint32_t& phases) {
    Barrier::wait(&pushed[slot], (phases >> slot) & 1u);
    phases ^= 1u << slot;
    const auto value = [&](int r) {
      V v;
      memcpy(&v, received[slot][r], sizeof(V));
      return v;
    };
    V sum = value(0);
    for (int r = 1; r < cluster; ++r) sum = op(sum, value(r));
    return sum;
  }
};

}  // namespace fusekit::device
