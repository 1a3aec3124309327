#pragma once
// The mainloop of the Hopper attention forward kernel: the producer's TMA loads and the
// consumers' wgmma GEMMs with the online softmax between them.
//
// Producer (one warp, whose lane 0 issues every copy and arrive), per query tile, in the order the
// consumers use the data: K of the first key tile, the tile's id and Q onto its own mbarrier
// (q_full; before it the producer waits on q_empty, which all 256 consumer threads arrive on as
// soon as their last S = Q·Kᵀ of the previous tile has landed), then K_{j+1} before V_j (a consumer's turn j issues S_{j+1} with P_j·V_j), then the last V. K
// and V go through two kStages-deep pipelines (full barrier: TMA bytes landed; empty barrier: all
// 256 consumer threads released the stage) whose states carry on from one query tile to the next,
// so the next tile's first K loads while the consumers finish this one. The next tile's Q is
// prefetched into L2 a whole tile ahead, so its load after q_empty is an L2 hit.
//
// Consumers (two warpgroups of 64 query rows each, pingponging; sm90_named_barriers.cuh), per
// key tile j, overlapping the softmax of tile j with the P·V GEMM of tile j − 1 in the same
// warpgroup (FlashAttention-3's intra-warpgroup overlap):
//   issue S_j = Q·K_jᵀ (SS: both operands from shared memory)
//   issue O += P_{j−1}·V_{j−1} (RS: P from registers)        ← both in one turn of the pingpong
//   wait for S_j; release K_j; soft-cap, mask, online softmax of S_j (α_j, P_j unnormalised)
//   (top of the next turn) wait for P·V; release V_{j−1}; O ← α_j·O; P_j rounded to 16 bits
// then a last turn issues O += P_last·V_last. Registers live across a turn: S_j, P_{j−1}, O.
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <cstdint>
#include <type_traits>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/device/attention/sequence_view.cuh"
#include "fusekit/device/attention/sm90_mask.cuh"
#include "fusekit/device/attention/sm90_named_barriers.cuh"
#include "fusekit/device/attention/sm90_softmax.cuh"
#include "fusekit/device/attention/sm90_tile_scheduler.cuh"
#include "fusekit/device/attention/sm90_tile_shape.cuh"

namespace fusekit::device::attention::sm90 {

using namespace cute;

// A [batch, seqlen, heads, dim] tensor as TMA sees it: (token, dim, head, batch), dim contiguous.
using GmemShape = Shape<int, int, int, int>;
using GmemLayout = Layout<GmemShape, Stride<std::int64_t, _1, std::int64_t, std::int64_t>>;

template <class T, class SmemLayout>
using TmaLoad = decltype(make_tma_copy(SM90_TMA_LOAD{},
                                       make_tensor(make_gmem_ptr(static_cast<const T*>(nullptr)), GmemLayout{}),
                                       SmemLayout{}));

template <class T, class SmemLayout>
using TmaStore = decltype(make_tma_copy(SM90_TMA_STORE{},
                                        make_tensor(make_gmem_ptr(static_cast<T*>(nullptr)), GmemLayout{}),
                                        SmemLayout{}));

template <class Tile>
struct Sm90ForwardParams {
  using T = typename Tile::Element;
  FlashForwardParams base;  // pointers for the epilogue, lengths, mask and softmax scalars
  TmaLoad<T, typename Tile::SmemLayoutQ> tma_q;
  TmaLoad<T, typename Tile::SmemLayoutKVStage> tma_k, tma_v;
  TmaStore<T, typename Tile::SmemLayoutO> tma_o;  // used by OutputPath::SharedTma
  int heads_kv = 0, batch = 0;
  L2GroupedScheduler scheduler;
};

template <class Tile>
struct Sm90SharedStorage {
  using T = typename Tile::Element;
  // NOTE: 1024-byte alignment: the 128-byte swizzle repeats every 8 rows of 128 bytes, and TMA
  // and the wgmma descriptors (base offset 0) both assume a tile starts on that period.
  static constexpr std::size_t kSwizzleAlignment = 1024;
  array_aligned<T, cosize_v<typename Tile::SmemLayoutQ>, kSwizzleAlignment> q;
  array_aligned<T, cosize_v<typename Tile::SmemLayoutKV>, kSwizzleAlignment> k;
  array_aligned<T, cosize_v<typename Tile::SmemLayoutKV>, kSwizzleAlignment> v;
  // One warpgroup's O tile (OutputPath::SharedTma; a byte otherwise). The warpgroups write it in
  // turn, and the storer warp sends each write out (sm90_epilogue.cuh).
  struct NoTile {};
  std::conditional_t<Tile::kOutput == OutputPath::SharedTma,
                     array_aligned<T, cosize_v<typename Tile::SmemLayoutO>, kSwizzleAlignment>, NoTile>
      o;
  typename Tile::Pipeline::SharedStorage pipeline_k, pipeline_v;
  // The query tile handoff, once per tile the CTA works on (with or without keys, and once more
  // with the end sentinel): the producer writes tile_id and arrives on q_full (with Q's bytes
  // when the tile has keys); the consumers read tile_id after q_full and arrive on q_empty once
  // they are done with Q (after their last S = Q·Kᵀ) and the id.
  cutlass::arch::ClusterTransactionBarrier::ValueType q_full;  // id written (and Q landed)
  cutlass::arch::ClusterBarrier::ValueType q_empty;            // consumers done with Q and the id
  int tile_id;  // ≥ the scheduler's ids(): no more tiles
  // The O tile's turns (OutputPath::SharedTma): o_full when a warpgroup's 128 threads have written
  // it; o_empty[w] when the storer's TMA store has read the other warpgroup's write, so that
  // warpgroup w may write next (sm90_epilogue.cuh).
  cutlass::arch::ClusterBarrier::ValueType o_full, o_empty[kConsumers];
};

// Phase parity of the q_full / q_empty barriers for the CTA's handoff number `handoffs` (from 0).
__device__ __forceinline__ std::uint32_t q_phase(int handoffs) { return static_cast<std::uint32_t>(handoffs) & 1u; }

// The producer warp's start of handoff number `handoffs`: once the consumers are done with the
// previous one (Q and the id), the tile's id, written by the leader lane. NOTE: the leader's
// arrive on q_full that follows releases this write to the consumers, whose wait on q_full
// acquires it.
template <class Storage>
__device__ __forceinline__ void write_tile_id(Storage& storage, int tile, int handoffs, bool leader) {
  if (handoffs > 0) cutlass::arch::ClusterBarrier::wait(&storage.q_empty, q_phase(handoffs - 1));
  if (leader) storage.tile_id = tile;
}

// The producer warp's half of a handoff without a Q load (a tile without visible keys, or the end
// sentinel): the id alone, released by the leader lane.
template <class Storage>
__device__ __forceinline__ void hand_off_id(Storage& storage, int tile, int handoffs, bool leader) {
  write_tile_id(storage, tile, handoffs, leader);
  if (leader) cutlass::arch::ClusterBarrier::arrive(&storage.q_full);
}

// A consumer thread's end of a handoff: done with Q and the id, so the producer may hand off the
// next tile. NOTE: called as soon as the tile's last S = Q·Kᵀ has landed, before its softmax, so
// that the next tile's Q (an L2 hit) loads under that softmax and the last P·V.
template <class Storage>
__device__ __forceinline__ void release_q(Storage& storage) {
  cutlass::arch::ClusterBarrier::arrive(&storage.q_empty);
}

enum class Accumulate : std::uint8_t { Overwrite, Add };

// C (=|+=) A·B over the k-blocks of one warpgroup's tile, issued as one wgmma batch (not waited).
// A is read from registers (RS) or through shared-memory descriptors (SS); registers read by an
// in-flight wgmma are fenced so that the compiler neither moves nor reuses them early.
template <Accumulate kAccumulate, class TiledMma, class FragA, class FragB, class FragC>
__device__ __forceinline__ void issue_gemm(TiledMma& mma, FragA& a, const FragB& b, FragC& c) {
  constexpr bool kRegisterA = !std::is_same_v<typename FragA::value_type, GMMA::DescriptorIterator::value_type>;
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = kAccumulate == Accumulate::Overwrite ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
#pragma unroll
  for (int kb = 0; kb < size<2>(a); ++kb) {
    cute::gemm(mma, a(_, _, kb), b(_, _, kb), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kRegisterA) warpgroup_fence_operand(a);
}

template <class Tile>
struct Sm90Mainloop {
  using T = typename Tile::Element;
  using Params = Sm90ForwardParams<Tile>;
  using Storage = Sm90SharedStorage<Tile>;
  using Pipeline = typename Tile::Pipeline;
  using PipelineState = typename Pipeline::PipelineState;
  using BlockM = typename Tile::BlockM;
  using BlockN = typename Tile::BlockN;
  using HeadDim = typename Tile::HeadDim;
  static constexpr int kBlockN = Tile::kBlockN;
  static constexpr int kHeadDim = Tile::kHeadDim;
  // NOTE: make_shape takes its arguments by reference; a copy keeps the static member from being
  // odr-used in device code (it has no storage there).
  static constexpr int head_dim() { return kHeadDim; }

  // Q of a query tile as TMA sees it: (TMA, 1, 1).
  __device__ static auto q_tile(Params const& p, const WorkTile& work) {
    Tensor m_q = p.tma_q.get_tma_tensor(make_shape(p.base.seqlen_q, head_dim(), p.base.heads_q, p.batch));
    Tensor g_q = local_tile(m_q(_, _, work.head, work.batch), Shape<BlockM, HeadDim>{}, make_coord(work.m_block, 0));
    return p.tma_q.get_slice(0).partition_S(g_q);
  }

  // Brings a later query tile's Q into L2 (no shared memory, no barrier). Run by one thread (the
  // producer warp's leader).
  __device__ static void prefetch_q(Params const& p, const WorkTile& work) { prefetch(p.tma_q, q_tile(p, work)); }

  // The producer's loads for query tile `tile` (the CTA's handoff number `handoffs`, with key
  // tiles): K and V for j in `tiles` and Q, in the order of the header, with the tile's id handed
  // to the consumers beside Q. Run by the producer warp, whose leader lane issues the copies;
  // `k_state` and `v_state` carry over from tile to tile.
  __device__ static void load(Params const& p, Storage& storage, Pipeline& pipeline_k, Pipeline& pipeline_v,
                              PipelineState& k_state, PipelineState& v_state, int tile, const WorkTile& work,
                              KeyTiles tiles, int handoffs, bool leader) {
    const int kv_head = work.head / p.base.group;
    Tensor m_k = p.tma_k.get_tma_tensor(make_shape(p.base.seqlen_k, head_dim(), p.heads_kv, p.batch));
    Tensor m_v = p.tma_v.get_tma_tensor(make_shape(p.base.seqlen_k, head_dim(), p.heads_kv, p.batch));
    Tensor g_k = local_tile(m_k(_, _, kv_head, work.batch), Shape<BlockN, HeadDim>{}, make_coord(_, 0));
    Tensor g_v = local_tile(m_v(_, _, kv_head, work.batch), Shape<BlockN, HeadDim>{}, make_coord(_, 0));
    Tensor s_q = make_tensor(make_smem_ptr(storage.q.data()), typename Tile::SmemLayoutQ{});
    Tensor s_k = make_tensor(make_smem_ptr(storage.k.data()), typename Tile::SmemLayoutKV{});
    Tensor s_v = make_tensor(make_smem_ptr(storage.v.data()), typename Tile::SmemLayoutKV{});
    auto cta_k = p.tma_k.get_slice(0);
    auto cta_v = p.tma_v.get_slice(0);
    Tensor t_gq = q_tile(p, work);  // (TMA, 1, 1)
    Tensor t_sq = p.tma_q.get_slice(0).partition_D(s_q);
    Tensor t_gk = cta_k.partition_S(g_k);  // (TMA, 1, 1, key tiles)
    Tensor t_sk = cta_k.partition_D(s_k);  // (TMA, 1, 1, stages)
    Tensor t_gv = cta_v.partition_S(g_v);
    Tensor t_sv = cta_v.partition_D(s_v);

    // NOTE: rows past seqlen_q or seqlen_k are zero-filled by TMA and still count in the
    // transaction bytes, so every barrier expects whole tiles.
    auto load_k = [&](int n) {
      pipeline_k.producer_acquire(k_state);
      if (leader)
        copy(p.tma_k.with(*pipeline_k.producer_get_barrier(k_state)), t_gk(_, _, _, n), t_sk(_, _, _, k_state.index()));
      ++k_state;
    };
    auto load_v = [&](int n) {
      pipeline_v.producer_acquire(v_state);
      if (leader)
        copy(p.tma_v.with(*pipeline_v.producer_get_barrier(v_state)), t_gv(_, _, _, n), t_sv(_, _, _, v_state.index()));
      ++v_state;
    };
    load_k(tiles.begin);
    write_tile_id(storage, tile, handoffs, leader);
    if (leader) {
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&storage.q_full, Tile::kTileBytesQ);
      copy(p.tma_q.with(storage.q_full), t_gq, t_sq);
    }
    for (int n = tiles.begin + 1; n < tiles.end; ++n) {
      load_k(n);
      load_v(n - 1);
    }
    load_v(tiles.end - 1);
  }

  // A consumer warpgroup's work on one query tile with key tiles, its Q landed (q_full): after
  // it, `o` holds the unnormalised Σ_j P_j·V_j and `softmax` the row statistics. `thread` counts
  // the 256 consumer threads.
  template <class FragO>
  __device__ static void mma(Params const& p, Storage& storage, Pipeline& pipeline_k, Pipeline& pipeline_v,
                             PipelineState& k_state, PipelineState& v_state, const SequenceView& seq, int m0,
                             KeyTiles tiles, const Pingpong& pingpong, int thread, FragO& o,
                             OnlineSoftmax<2>& softmax) {
    typename Tile::TiledMmaQK mma_qk;
    typename Tile::TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(thread);
    auto thr_pv = mma_pv.get_thread_slice(thread);
    Tensor s_q = make_tensor(make_smem_ptr(storage.q.data()), typename Tile::SmemLayoutQ{});
    Tensor s_k = make_tensor(make_smem_ptr(storage.k.data()), typename Tile::SmemLayoutKV{});
    Tensor s_vt = make_tensor(make_smem_ptr(storage.v.data()), typename Tile::SmemLayoutVt{});
    Tensor t_rq = thr_qk.partition_fragment_A(s_q);   // descriptors (MMA, 1, D/16)
    Tensor t_rk = thr_qk.partition_fragment_B(s_k);   // descriptors (MMA, 1, D/16, stages)
    Tensor t_rv = thr_pv.partition_fragment_B(s_vt);  // descriptors (MMA, 1, kBlockN/16, stages)
    Tensor t_rs = partition_fragment_C(mma_qk, Shape<BlockM, BlockN>{});
    Tensor t_rp = make_tensor<T>(partition_shape_A(mma_pv, Shape<BlockM, BlockN>{}));
    Tensor scores = rows_view(t_rs);
    Tensor coords = rows_view(thr_qk.partition_C(make_identity_tensor(Shape<BlockM, BlockN>{})));
    Tensor out = rows_view(o);
    const int first_row = m0 + pingpong.consumer() * kWgmmaRows, last_row = first_row + kWgmmaRows - 1;
    float alpha[2];

    auto softmax_of_tile = [&](int n) {
      soft_cap_and_mask(scores, coords, p.base, seq, m0, n * kBlockN, first_row, last_row, kBlockN);
      softmax.update(scores, p.base.scale_log2, alpha);
    };

    // P_{j−1}·V_{j−1} has completed: V_{j−1} is released and O brought to tile j's row max.
    auto retire_pv = [&] {
      warpgroup_wait<0>();
      pipeline_v.consumer_release(v_state);
      ++v_state;
      OnlineSoftmax<2>::rescale(out, alpha);
    };

    // Tile 0: S only.
    pipeline_k.consumer_wait(k_state);
    pingpong.wait_turn();
    issue_gemm<Accumulate::Overwrite>(mma_qk, t_rq, t_rk(_, _, _, k_state.index()), t_rs);
    pingpong.pass_turn();
    warpgroup_wait<0>();
    pipeline_k.consumer_release(k_state);
    ++k_state;
    if (tiles.count() == 1) release_q(storage);
    softmax_of_tile(tiles.begin);

    for (int n = tiles.begin + 1; n < tiles.end; ++n) {
      // NOTE: the previous turn's P·V is retired here, at the top of the next turn, and not right
      // after that turn's softmax: ptxas places a wgmma wait as early as its basic block allows,
      // and with the softmax in the same block it put the wait above the softmax (SASS of
      // 2026-11-29), so the softmax ran after this warpgroup's own P·V instead of under it. The
      // loop's branch keeps the two in separate blocks.
      if (n > tiles.begin + 1) retire_pv();
      round_fragment(t_rs, t_rp);
      pipeline_k.consumer_wait(k_state);
      pipeline_v.consumer_wait(v_state);
      pingpong.wait_turn();
      issue_gemm<Accumulate::Overwrite>(mma_qk, t_rq, t_rk(_, _, _, k_state.index()), t_rs);
      issue_gemm<Accumulate::Add>(mma_pv, t_rp, t_rv(_, _, _, v_state.index()), o);
      pingpong.pass_turn();
      warpgroup_wait<1>();  // S_j has landed; P_{j−1}·V_{j−1} may still run
      pipeline_k.consumer_release(k_state);
      ++k_state;
      if (n + 1 == tiles.end) release_q(storage);
      softmax_of_tile(n);
    }
    if (tiles.count() > 1) retire_pv();
    round_fragment(t_rs, t_rp);

    // The last tile's P·V.
    pipeline_v.consumer_wait(v_state);
    pingpong.wait_turn();
    issue_gemm<Accumulate::Add>(mma_pv, t_rp, t_rv(_, _, _, v_state.index()), o);
    pingpong.pass_turn();
    warpgroup_wait<0>();
    pipeline_v.consumer_release(v_state);
    ++v_state;
  }
};

}  // namespace fusekit::device::attention::sm90
