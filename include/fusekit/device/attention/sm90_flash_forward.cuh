#pragma once
// The Hopper (sm_90a) attention forward kernel, FlashAttention-3 style:
//   O = softmax(mask(softcap(scale·Q·Kᵀ)))·V,  LSE = log Σ_j exp(mask(softcap(scale·Q·Kᵀ)))
// Three warpgroups per CTA: a producer whose warp 0 issues the TMA loads and whose warp 1 the TMA
// stores of O (registers cut to kProducerRegisters by setmaxnreg), and two consumers of 64 query
// rows each that run the wgmma GEMMs and the softmax (registers raised to kConsumerRegisters). The roles live in their own
// files: sm90_tile_shape (tiles, layouts, register split), sm90_mainloop (load and mma),
// sm90_softmax, sm90_mask, sm90_named_barriers (pingpong), sm90_tile_scheduler, sm90_epilogue.
// Design and plan: docs/hopper_attention.md.
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "fusekit/device/attention/sequence_view.cuh"
#include "fusekit/device/attention/sm90_epilogue.cuh"
#include "fusekit/device/attention/sm90_mainloop.cuh"
#include "fusekit/device/attention/sm90_softmax.cuh"
#include "fusekit/device/attention/sm90_tile_scheduler.cuh"
#include "fusekit/device/attention/sm90_tile_shape.cuh"

namespace fusekit::device::attention::sm90 {

using namespace cute;

template <class Tile>
inline constexpr std::size_t kSmemBytes = sizeof(Sm90SharedStorage<Tile>);

// Persistent: each CTA runs the query tiles L2GroupedScheduler gives it (sm90_tile_scheduler).
// NOTE: __launch_bounds__(kThreads, 1) gives the register cap at entry (65536 / 384 → 168) that
// setmaxnreg needs to take effect; each role is one branch of a single if/else.
template <class Tile>
__global__ void __launch_bounds__(kThreads, 1) sm90_flash_forward_kernel(const __grid_constant__ Sm90ForwardParams<Tile> p) {
  using Mainloop = Sm90Mainloop<Tile>;
  using Storage = Sm90SharedStorage<Tile>;
  static_assert(sizeof(Storage) <= kSmemCapacity, "Q and the K/V stages exceed the shared memory of a CTA");
  using Pipeline = typename Tile::Pipeline;
  using PipelineState = typename Pipeline::PipelineState;
  extern __shared__ __align__(Storage::kSwizzleAlignment) unsigned char smem[];
  Storage& storage = *reinterpret_cast<Storage*>(smem);

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  // The producer warp walks the tiles and waits on the pipelines with all its lanes (a warp-wide
  // branch, so that its values stay in uniform registers: as one thread inside a two-way branch it
  // spilled at kProducerRegisters; ptxas, 2026-12-01); its lane 0, the issuer, issues every TMA
  // load. The storer warp sends O out (OutputPath::SharedTma; sm90_epilogue.cuh).
  constexpr int kProducerWarp = 0, kStorerWarp = 1;
  const bool issuer = threadIdx.x == 0;
  if (issuer) {
    prefetch_tma_descriptor(p.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_v.get_tma_descriptor());
    cutlass::arch::ClusterBarrier::init(&storage.q_full, 1);
    cutlass::arch::ClusterBarrier::init(&storage.q_empty, kConsumers * kWarpgroupThreads);
    cutlass::arch::ClusterBarrier::init(&storage.o_full, kWarpgroupThreads);
    for (int w = 0; w < kConsumers; ++w) cutlass::arch::ClusterBarrier::init(&storage.o_empty[w], 1);
  }
  typename Pipeline::Params pipeline_params;
  pipeline_params.transaction_bytes = Tile::kTileBytesKV;
  pipeline_params.role = warpgroup == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pipeline_params.is_leader = issuer;
  pipeline_params.num_consumers = kConsumers * kWarpgroupThreads;
  // Warp 0 initialises each pipeline's barriers and fences every barrier init (q_full and
  // q_empty included: thread 0 is in warp 0).
  Pipeline pipeline_k(storage.pipeline_k, pipeline_params, ClusterShape{});
  Pipeline pipeline_v(storage.pipeline_v, pipeline_params, ClusterShape{});
  __syncthreads();  // every barrier is initialised before anyone waits on it

  // NOTE: a reference into the kernel's parameter space: the scheduler's fields are read from the
  // constant bank when needed instead of holding consumer registers across the mainloop.
  const L2GroupedScheduler& scheduler = p.scheduler;
  // The producer picks the tiles and hands each id to the consumers (Storage::tile_id); a tile
  // without visible keys loads nothing and stores O = 0.
  auto tile_geometry = [&](int tile, WorkTile& work, SequenceView& seq, int& m0) {
    work = scheduler.at(tile);
    seq = fixed_sequence_view(p.base);
    m0 = work.m_block * kBlockM;
    return key_tiles(seq, m0, min(m0 + kBlockM, seq.seqlen_q) - 1, Tile::kBlockN);
  };

  if (warpgroup == 0) {
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
    const int warp = static_cast<int>(threadIdx.x) / cutlass::NumThreadsPerWarp;
    if (warp == kStorerWarp) {
      if constexpr (Tile::kOutput == OutputPath::SharedTma) Sm90Epilogue<Tile>::send_tiles(p, storage);
    } else if (warp == kProducerWarp) {
      PipelineState k_state = cutlass::make_producer_start_state<Pipeline>();
      PipelineState v_state = k_state;
      int handoffs = 0;
      const int grid = static_cast<int>(gridDim.x), cta = static_cast<int>(blockIdx.x);
      for (int tile = scheduler.first(grid, cta); tile < scheduler.ids(); ++handoffs) {
        WorkTile work;
        SequenceView seq;
        int m0 = 0;
        const KeyTiles tiles = tile_geometry(tile, work, seq, m0);
        if (tiles.count() > 0)
          Mainloop::load(p, storage, pipeline_k, pipeline_v, k_state, v_state, tile, work, tiles, handoffs, issuer);
        else
          hand_off_id(storage, tile, handoffs, issuer);
        // NOTE: the next tile is taken once this one's loads are issued (the producer runs at most
        // kStages key tiles ahead of the consumers), and its Q prefetched into L2 then. Taken
        // before the loads, it stayed live across them and the producer spilled at its
        // kProducerRegisters.
        tile = scheduler.next(tile, grid, cta);
        if (issuer && tile < scheduler.ids()) Mainloop::prefetch_q(p, scheduler.at(tile));
      }
      hand_off_id(storage, scheduler.ids(), handoffs, issuer);  // the end sentinel
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
    const Pingpong pingpong(warpgroup - 1);
    const int thread = static_cast<int>(threadIdx.x) - kWarpgroupThreads;
    PipelineState k_state, v_state;
    pingpong.start();
    for (int handoffs = 0;; ++handoffs) {
      cutlass::arch::ClusterBarrier::wait(&storage.q_full, q_phase(handoffs));
      // NOTE: volatile: read again after every wait, never kept from the previous handoff.
      const int tile = *static_cast<volatile int*>(&storage.tile_id);
      if (tile >= scheduler.ids()) break;
      WorkTile work;
      SequenceView seq;
      int m0 = 0;
      const KeyTiles tiles = tile_geometry(tile, work, seq, m0);
      Tensor o = partition_fragment_C(typename Tile::TiledMmaPV{}, Shape<typename Tile::BlockM, typename Tile::HeadDim>{});
      clear(o);
      OnlineSoftmax<2> softmax;
      if (tiles.count() > 0) {
        Mainloop::mma(p, storage, pipeline_k, pipeline_v, k_state, v_state, seq, m0, tiles, pingpong, thread, o,
                      softmax);
      } else {
        release_q(storage);
      }
      // NOTE: this warpgroup's epilogue overlaps the other's GEMMs and the producer's loads of
      // the next tile.
      Sm90Epilogue<Tile>::store(p, storage, seq, work, m0, thread, handoffs, o, softmax);
    }
    pingpong.finish();
  }
}

}  // namespace fusekit::device::attention::sm90
