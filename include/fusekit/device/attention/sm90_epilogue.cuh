#pragma once
// Epilogue of the Hopper attention forward kernel: O = (Σ_j P_j·V_j)/ℓ rounded to T, and
// LSE = (m·c + log2 ℓ)·ln 2 per query row, c = scale·log2(e).
//
// OutputPath::SharedTma (sm90_tile_shape.cuh): the CTA has one shared-memory tile of 64 rows of
// O, which the two consumer warpgroups fill in turn (warpgroup 0's rows of a query tile, then
// warpgroup 1's, then the next query tile's): a warpgroup waits until the storer has read the
// other warpgroup's last write (its o_empty barrier), writes its rows with stmatrix and arrives on
// o_full; the storer warp (a producer-warpgroup warp that does nothing else, walking the CTA's
// tiles as the producer does) waits for o_full, stores the tile with one TMA store, and once the
// store has read it arrives on the other warpgroup's o_empty. So a consumer spends a few stmatrix
// on O where it spent 32 global stores per thread, and the store's write to memory overlaps the
// next tile's GEMMs. Rows past the sequence's end are clipped by the TMA store.
//
// NOTE: one o_empty barrier per warpgroup, so that no wait is ever two phases behind its barrier
// (parity cannot tell those apart): a warpgroup whose tile has no keys takes no pingpong turn and
// may reach its next write while the storer still holds its previous one.
//
// OutputPath::Registers: each thread stores its accumulator pairs straight from registers (4
// bytes per store, a quad covering 16 contiguous bytes of a row).
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/numeric_conversion.h>

#include <cstdint>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/device/attention/sequence_view.cuh"
#include "fusekit/device/attention/sm90_mainloop.cuh"
#include "fusekit/device/attention/sm90_softmax.cuh"
#include "fusekit/device/attention/sm90_tile_scheduler.cuh"
#include "fusekit/device/attention/sm90_tile_shape.cuh"

namespace fusekit::device::attention::sm90 {

using namespace cute;

inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kThreadsPerRow = 4;  // a quad holds one accumulator row

// Phase parities of the O tile's barriers. Writes are counted per CTA, write = 2·(handoff number
// `tile`) + warpgroup: o_full completes a phase per write. Warpgroup w's write for its `tile`-th
// tile waits until the other warpgroup's first tile + w writes have been read: phase tile + w − 1
// of o_empty[w] (for warpgroup 0's first write, phase −1, which a fresh barrier counts as
// completed).
__device__ __forceinline__ std::uint32_t full_phase(int write) { return static_cast<std::uint32_t>(write) & 1u; }
__device__ __forceinline__ std::uint32_t empty_phase(int tile, int warpgroup) {
  return static_cast<std::uint32_t>(tile + warpgroup + 1) & 1u;
}

// x, opaque to the compiler: what derives from it is computed where it is used, and not before
// the volatile asm (an stmatrix) ahead of it. NOTE: without it the stmatrix addresses, which
// depend on the thread alone, were hoisted to the kernel's start and spilled across the mainloop,
// and all of O was rounded to T before the first stmatrix (ptxas, 2026-12-01).
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}
__device__ __forceinline__ void make_opaque(float& x) { asm volatile("" : "+f"(x)); }

template <class Tile>
struct Sm90Epilogue {
  using T = typename Tile::Element;
  using Params = Sm90ForwardParams<Tile>;
  using Storage = Sm90SharedStorage<Tile>;
  using HeadDim = typename Tile::HeadDim;
  static constexpr bool kStaged = Tile::kOutput == OutputPath::SharedTma;
  static constexpr int head_dim() { return Tile::kHeadDim; }

  // A consumer thread's part of query tile `work`, the CTA's `tile`-th (rows from m0; `thread`
  // counts the 256 consumer threads); rows at or past the sequence's end are not stored.
  template <class FragO>
  __device__ static void store(const Params& p, Storage& storage, const SequenceView& seq, const WorkTile& work,
                               int m0, int thread, int tile, FragO& o, const OnlineSoftmax<2>& softmax) {
    typename Tile::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(thread);
    Tensor coords = rows_view(thr_pv.partition_C(make_identity_tensor(Shape<typename Tile::BlockM, HeadDim>{})));
    Tensor out = rows_view(o);
#pragma unroll
    for (int r = 0; r < size<0>(out); ++r) {
      const float sum = quad_sum(softmax.row_sum[r]);
      // NOTE: a row that sees no key has ℓ = 0: O = 0 and LSE = −∞, as in the reference.
      const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
      for (int c = 0; c < size<1>(out); ++c) out(r, c) *= inv_sum;
      const int row = m0 + get<0>(coords(r, 0));
      if (p.base.lse != nullptr && thread % kThreadsPerRow == 0 && row < seq.seqlen_q) {
        const float lse = sum > 0.0f ? (softmax.row_max[r] * p.base.scale_log2 + __log2f(sum)) * kLn2 : kMinusInf;
        p.base.lse[work.batch * p.base.lse_batch_stride + work.head * p.base.lse_head_stride + seq.q_begin + row] = lse;
      }
    }
    if constexpr (kStaged) {
      const int warpgroup = thread / kWarpgroupThreads;
      wait_phase(&storage.o_empty[warpgroup], empty_phase(tile, warpgroup));
      Tensor s_o = make_tensor(make_smem_ptr(storage.o.data()), typename Tile::SmemLayoutO{});
      auto copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, T>{}, typename Tile::TiledMmaPVWarpgroup{});
      auto thr_copy = copy_o.get_thread_slice(opaque(thread % kWarpgroupThreads));
      Tensor src = thr_copy.retile_S(o);  // fp32 (CPY, CPY_M, CPY_N)
      Tensor dst = thr_copy.partition_D(s_o);
      // NOTE: rounded one stmatrix at a time, so that O is never held in fp32 and in T at once
      // (3·D/4 registers: at D = 256 that spilled).
#pragma unroll
      for (int m = 0; m < size<1>(src); ++m)
#pragma unroll
        for (int n = 0; n < size<2>(src); ++n) {
          Tensor chunk = make_tensor_like<T>(src(_, m, n));
#pragma unroll
          for (int i = 0; i < size(chunk); ++i) make_opaque(src(i, m, n));
          round_fragment(src(_, m, n), chunk);
          copy(copy_o, chunk, dst(_, m, n));
        }
      hand_tile_over(storage);
    } else {
      Tensor o_out = make_tensor_like<T>(o);
      round_fragment(o, o_out);
      const FlashForwardParams& b = p.base;
      T* o_tile = static_cast<T*>(b.o) + work.batch * b.o_strides.batch + (seq.q_begin + m0) * b.o_strides.token +
                  work.head * b.o_strides.head;
      using Pair = cutlass::Array<T, 2>;
      Tensor pairs = rows_view(o_out);
#pragma unroll
      for (int r = 0; r < size<0>(pairs); ++r) {
        const int tile_row = get<0>(coords(r, 0));
        if (m0 + tile_row >= seq.seqlen_q) continue;
        T* o_row = o_tile + tile_row * b.o_strides.token;
#pragma unroll
        for (int c = 0; c < size<1>(pairs); c += 2) {
          Pair pair;
          pair[0] = pairs(r, c);
          pair[1] = pairs(r, c + 1);
          *reinterpret_cast<Pair*>(o_row + get<1>(coords(r, c))) = pair;
        }
      }
    }
  }

  // The storer warp (OutputPath::SharedTma): walks the CTA's tiles in the producer's order, and
  // stores each warpgroup's write with TMA from one of its threads once written, handing the tile
  // to the other warpgroup once the store has read it.
  __device__ static void send_tiles(const Params& p, Storage& storage) {
    const bool lane_predicate = cute::elect_one_sync();
    if (lane_predicate) prefetch_tma_descriptor(p.tma_o.get_tma_descriptor());
    const L2GroupedScheduler& scheduler = p.scheduler;
    const int grid = static_cast<int>(gridDim.x), cta = static_cast<int>(blockIdx.x);
    Tensor m_o = p.tma_o.get_tma_tensor(make_shape(p.base.seqlen_q, head_dim(), p.base.heads_q, p.batch));
    Tensor s_o = make_tensor(make_smem_ptr(storage.o.data()), typename Tile::SmemLayoutO{});
    auto cta_o = p.tma_o.get_slice(0);
    Tensor t_so = cta_o.partition_S(s_o);  // (TMA, 1, 1)
    int write = 0;
    for (int tile = scheduler.first(grid, cta); tile < scheduler.ids(); tile = scheduler.next(tile, grid, cta)) {
      const WorkTile work = scheduler.at(tile);
#pragma unroll 1
      for (int w = 0; w < kConsumers; ++w, ++write) {
        wait_phase(&storage.o_full, full_phase(write));
        if (lane_predicate) {
          Tensor g_o = local_tile(m_o(_, _, work.head, work.batch), Shape<Int<kWgmmaRows>, HeadDim>{},
                                  make_coord(work.m_block * kConsumers + w, 0));
          copy(p.tma_o, t_so, cta_o.partition_D(g_o));
          tma_store_arrive();
          tma_store_wait<0>();  // the tile has been read (not yet written to memory)
          cutlass::arch::ClusterBarrier::arrive(&storage.o_empty[kConsumers - 1 - w]);
        }
        __syncwarp();
      }
    }
  }

 private:
  // Waits until the barrier's phase of parity `phase` has completed. NOTE: a loop around
  // try_wait, not ClusterBarrier::wait (whose loop is inside one asm statement): with that, the
  // consumers spilled across the mainloop (ptxas, 2026-12-01). Neither asm tells the compiler
  // that memory changes, so the memory clobber after the loop keeps the shared-memory accesses
  // that follow from being moved above the wait.
  __device__ static void wait_phase(cutlass::arch::ClusterBarrier::ValueType* barrier, std::uint32_t phase) {
    while (!cutlass::arch::ClusterBarrier::try_wait(barrier, phase)) {
    }
    asm volatile("" ::: "memory");
  }

  // The writes of this thread are made visible to the TMA store (the async proxy), and the tile
  // is the storer's once all 128 threads of the warpgroup have arrived.
  __device__ static void hand_tile_over(Storage& storage) {
    cutlass::arch::fence_view_async_shared();
    cutlass::arch::ClusterBarrier::arrive(&storage.o_full);
  }
};

}  // namespace fusekit::device::attention::sm90
