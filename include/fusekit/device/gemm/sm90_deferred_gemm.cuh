#pragma once
// The Hopper GEMM with a deferred epilogue: CUTLASS's TMA warp-specialized cooperative mainloop
// (two consumer warpgroups on a 128×256 tile, a 2×1 cluster multicasting B, a persistent tile
// scheduler) with the chain's activation and residual applied under the next tile's mainloop.
//
// Why: the Cooperative kernel (sm90_cutlass_kernel.cuh) runs its epilogue on the consumer warps
// between a tile's mainloop and the next, while the tensor cores wait. GELU's tanh takes one MUFU
// per value (16 a clock per SM) among ~9 instructions a value: ~2 % of a tile at 8192³ with the
// residual (docs/performance.md, session 43). Here the consumers only add the bias, round
// x = acc + b to the output type once and hand the tile to shared memory; three warps of the
// producer warpgroup, idle in the Cooperative kernel, apply the activation and the residual and
// store D by TMA while the consumers compute the next tile.
//
// Precision: x is rounded to 16 bits before the activation, as the unfused chain rounds it (a
// GEMM with a bias epilogue, then GELU); y = gelu(x) + R is rounded once more at the end.
//
// Per tile, in order:
//   consumers:  mainloop → wait hand_empty → H = T(acc + b) (stmatrix) → arrive hand_full
//   epilogue:   wait hand_full → each 128×64 block of H: H = T(gelu(H) [+ R]) in place, then one
//               thread's TMA store of the block → all stores read → arrive hand_empty
// so the hand-over tile H (64 KB) is the only buffer; the mainloop keeps the rest (3 stages).
// A CTA's last tile has no mainloop after it to hide under: the consumers join the epilogue warps
// on it (three warps alone would take ~10 µs, against ~1 µs for the Cooperative epilogue).
#include <cstdint>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/sm90_tile_scheduler.hpp>
#include <cutlass/numeric_conversion.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "fusekit/device/pointwise/activation.cuh"

namespace fusekit::device::sm90 {

using namespace cute;

// The chains the deferred epilogue applies (x = acc + bias[j], rounded to T).
enum class DeferredChain : std::uint8_t {
  BiasGelu,          // D = gelu_tanh(x)
  BiasGeluResidual,  // D = gelu_tanh(x) + R
};

template <class Element, DeferredChain kChain>
struct DeferredGemm {
  using ElementType = Element;  // of A, B, D, the bias and R
  static constexpr bool kResidual = kChain == DeferredChain::BiasGeluResidual;
  using TileShape = Shape<_128, _256, _64>;
  using ClusterShape = Shape<_2, _1, _1>;
  static constexpr int kTileM = size<0>(TileShape{});
  static constexpr int kTileN = size<1>(TileShape{});
  // A TMA store box is one 128-byte swizzle row wide: the tile leaves in kBlocks column blocks.
  static constexpr int kBlockN = 128 / static_cast<int>(sizeof(Element));
  static constexpr int kBlocks = kTileN / kBlockN;
  static constexpr int kChunkBytes = 16;  // of one access to H or R
  static constexpr int kChunk = kChunkBytes / static_cast<int>(sizeof(Element));  // values per access
  static constexpr int kChunksPerBlockRow = kBlockN / kChunk;

  // Warp roles: warpgroup 0 holds the mainloop's TMA warp and the three epilogue warps;
  // warpgroups 1 and 2 are the consumers.
  static constexpr int kConsumerThreads = 2 * cutlass::NumThreadsPerWarpGroup;
  static constexpr int kEpilogueThreads = cutlass::NumThreadsPerWarpGroup - cutlass::NumThreadsPerWarp;
  static constexpr int MaxThreadsPerBlock = cutlass::NumThreadsPerWarpGroup + kConsumerThreads;
  static constexpr int MinBlocksPerMultiprocessor = 1;
  // Registers after setmaxnreg. setmaxnreg.inc draws only on what the block was launched with
  // (168 a thread at 384 threads), so the split must not exceed it or a consumer warp waits
  // forever: 2·128·200 + 128·104 = 384·168. The consumers hold a 128-value accumulator (ptxas uses
  // ~187 registers there); the epilogue warps four 16-byte chunks of H and eight of R (this pass's
  // and the next's) at a time (52 bytes spilled at 88 registers, ptxas sm_90a).
  static constexpr int kLaunchRegisters = 64 * 1024 / MaxThreadsPerBlock / 8 * 8;
  static constexpr int kConsumerRegisters = 200;
  static constexpr int kProducerRegisters = 104;
  static_assert(kConsumerThreads * kConsumerRegisters + cutlass::NumThreadsPerWarpGroup * kProducerRegisters <=
                    MaxThreadsPerBlock * kLaunchRegisters,
                "setmaxnreg can only share out the registers the block was launched with");
  // Chunks of H (and R) an epilogue thread has in flight at once.
  // NOTE: measured on the H100 (session 44): with two, the epilogue warps took ~20 µs a tile with
  // the residual (its loads' latency), slower than a K = 1024 mainloop.
  static constexpr int kChunksInFlight = 4;
  // Named barriers of a block of H written before its TMA store: among the epilogue warps, and
  // among them and the consumers on the CTA's last tile (the TMA warp stays out).
  static constexpr int kEpilogueBarrier = 0;
  static constexpr int kAllHandsBarrier = 1;
  static constexpr int kAllHands = kEpilogueThreads + kConsumerThreads;

  // H: the tile in T, 128-byte swizzled as the TMA store reads it; its kBlocks column blocks of
  // kTileM × kBlockN lie one after another (tile_to_shape repeats the atom down M first).
  using SmemLayoutAtom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutTile = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kTileM>, Int<kTileN>>{}));
  using SmemLayoutBlock = decltype(tile_to_shape(SmemLayoutAtom{}, Shape<Int<kTileM>, Int<kBlockN>>{}));
  static constexpr int kBlockElements = kTileM * kBlockN;
  static constexpr int kBlockBytes = kBlockElements * static_cast<int>(sizeof(Element));
  static constexpr int kHandBytes = kTileM * kTileN * static_cast<int>(sizeof(Element));
  // What shared memory holds beside the mainloop's stages: H, the staged bias, three mbarriers.
  static constexpr int kEpilogueSmemBytes =
      kHandBytes + kTileN * static_cast<int>(sizeof(float)) + 3 * static_cast<int>(sizeof(uint64_t));
  // The 128-byte swizzle repeats every 8 rows of 128 bytes; it acts on address bits, so H starts
  // on that period.
  static constexpr int kSwizzlePeriodBytes = 1024;
  static constexpr int kSwizzleRowBytes = 128;
  static constexpr int kSwizzleRows = kSwizzlePeriodBytes / kSwizzleRowBytes;
  static_assert(kChunksPerBlockRow * kChunkBytes == kSwizzleRowBytes, "a block row is one swizzle row");

  // Byte offset in a block of H of its 16-byte chunk c (chunks row-major, a 128-byte row of them
  // per row of the block): the 128-byte swizzle XORs the chunk's place in its row with the row's
  // index mod 8. Sm90DeferredHandOff checks it against SmemLayoutBlock.
  // NOTE: written out because CuTe's layout arithmetic on run-time (signed) indices took ~10
  // instructions a value in the epilogue warps' loop, as many as GELU and the residual (session 45,
  // SASS).
  CUTLASS_HOST_DEVICE static constexpr uint32_t swizzled_chunk_offset(uint32_t c) {
    const uint32_t row = c / kChunksPerBlockRow;
    return (c * kChunkBytes) ^ (row % kSwizzleRows * kChunkBytes);
  }

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kChunk, Element,
      cutlass::layout::ColumnMajor, kChunk, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<kEpilogueSmemBytes>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using TiledMma = typename Mainloop::TiledMma;
  using MainloopPipeline = typename Mainloop::MainloopPipeline;
  using PipelineState = typename Mainloop::PipelineState;
  static_assert(size(TiledMma{}) == kConsumerThreads, "two consumer warpgroups share the tile");
  using Scheduler = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;
  using ProblemShape = Shape<int, int, int, int>;  // (M, N, K, L = 1)

  // D row-major, (M, N) with stride (ldd, 1).
  using StrideD = Stride<int64_t, _1>;
  using TmaStoreD = decltype(make_tma_copy(
      SM90_TMA_STORE{}, make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), make_shape(0, 0), StrideD{}),
      SmemLayoutBlock{}));

  struct SharedStorage {
    struct Tensors : cute::aligned_struct<kSwizzlePeriodBytes, _0> {
      typename Mainloop::TensorStorage mainloop;
      cute::array_aligned<Element, kTileM * kTileN, kSwizzlePeriodBytes> hand;
    } tensors;
    alignas(16) float bias[kTileN];  // the tile's bias columns in f32 (0 past N)
    typename Mainloop::PipelineStorage pipeline;
    alignas(8) cutlass::arch::ClusterBarrier::ValueType bias_full;
    alignas(8) cutlass::arch::ClusterBarrier::ValueType hand_full;
    alignas(8) cutlass::arch::ClusterBarrier::ValueType hand_empty;
  };
  static constexpr int SharedStorageSize = sizeof(SharedStorage);
  static_assert(SharedStorageSize <= cutlass::gemm::collective::detail::sm90_smem_capacity_bytes,
                "the mainloop's stages, H and the barriers must fit in shared memory");

  struct Params {
    ProblemShape problem;
    typename Mainloop::Params mainloop;
    typename Scheduler::Params scheduler;
    TmaStoreD tma_store_d;
    const Element* bias;      // [N]
    const Element* residual;  // [M, ldr], or null without kResidual
    int64_t ldr;
  };

  CUTLASS_DEVICE void operator()(Params const& params, char* smem) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem);
    const int thread_idx = static_cast<int>(threadIdx.x);
    const int warp_group = cutlass::canonical_warp_group_idx();
    const int warp_in_group = cutlass::canonical_warp_idx_sync() % cutlass::NumWarpsPerWarpGroup;
    const bool is_tma_warp = warp_group == 0 && warp_in_group == 0;

    if (is_tma_warp && cute::elect_one_sync()) {
      Mainloop::prefetch_tma_descriptors(params.mainloop);
      cute::prefetch_tma_descriptor(params.tma_store_d.get_tma_descriptor());
    }
    typename MainloopPipeline::Params pipeline_params;
    pipeline_params.role = is_tma_warp      ? MainloopPipeline::ThreadCategory::Producer
                           : warp_group > 0 ? MainloopPipeline::ThreadCategory::Consumer
                                            : MainloopPipeline::ThreadCategory::NonParticipant;
    pipeline_params.is_leader = thread_idx % cutlass::NumThreadsPerWarpGroup == 0;
    pipeline_params.num_consumers = kConsumerThreads;
    pipeline_params.transaction_bytes = params.mainloop.tma_transaction_bytes;
    MainloopPipeline pipeline(shared.pipeline, pipeline_params, ClusterShape{});
    const auto barrier = [](auto& word) -> const cutlass::arch::ClusterBarrier& {
      return *reinterpret_cast<const cutlass::arch::ClusterBarrier*>(&word);
    };
    const auto& bias_full = barrier(shared.bias_full);    // the tile's bias staged (epilogue → consumers)
    const auto& hand_full = barrier(shared.hand_full);    // H holds the tile (consumers → epilogue)
    const auto& hand_empty = barrier(shared.hand_empty);  // H read out by the stores (epilogue → consumers)
    if (thread_idx == 0) {
      bias_full.init(kEpilogueThreads);
      hand_full.init(kConsumerThreads);
      hand_empty.init(1);
      cutlass::arch::fence_barrier_init();
    }
    // Every CTA of the cluster sees every barrier initialised before a multicast or an arrive.
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();

    Mainloop mainloop;
    const auto problem_mnkl = params.problem;
    auto load_inputs = mainloop.load_init(problem_mnkl, params.mainloop);
    const int k_tiles = ceil_div(get<2>(problem_mnkl), size<2>(TileShape{}));
    Scheduler scheduler{params.scheduler};
    auto work = scheduler.initial_work_tile_info(ClusterShape{});
    const auto next = [&](auto const& w) { return get<0>(scheduler.fetch_next_work(w)); };

    // The CTA's last tile (none: -1) and hand_full's phase for it, which every warp but the TMA
    // warp finishes together after its role's loop.
    int last_m = -1, last_n = -1;
    uint32_t last_phase = 0;
    int worker = 0;  // of the kAllHands threads that finish the last tile
    if (warp_group == 0) {
      cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
      if (warp_in_group == 0) {
        PipelineState write = cutlass::make_producer_start_state<MainloopPipeline>();
        for (; work.is_valid(); work = next(work)) {
          auto k_tile_iter = make_coord_iterator(shape<3>(get<0>(load_inputs)));
          mainloop.load(params.mainloop, pipeline, write, load_inputs,
                        make_coord(work.M_idx, work.N_idx, _, work.L_idx), k_tile_iter, k_tiles,
                        cutlass::canonical_lane_idx(), cute::block_rank_in_cluster(), shared.tensors.mainloop);
          write.advance(k_tiles);
        }
        mainloop.load_tail(pipeline, write);
        return;
      }
      const int epi_thread = thread_idx - cutlass::NumThreadsPerWarp;
      worker = epi_thread;
      uint32_t full_phase = 0;  // hand_full's phase for this tile
      while (work.is_valid()) {
        const auto following = next(work);
        stage_tile(params, shared, work.N_idx, epi_thread, bias_full);
        if (!following.is_valid()) {
          last_m = work.M_idx;
          last_n = work.N_idx;
          last_phase = full_phase;
          break;
        }
        wait(hand_full, full_phase);
        finish_tile<kEpilogueThreads>(params, shared, work.M_idx, work.N_idx, epi_thread, kEpilogueBarrier);
        if (epi_thread == 0) {
          cute::tma_store_wait<0>();  // every block read out of H
          arrive(hand_empty);
        }
        full_phase ^= 1;
        work = following;
      }
    } else {
      cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
      const int mma_thread_idx = thread_idx - cutlass::NumThreadsPerWarpGroup;
      worker = kEpilogueThreads + mma_thread_idx;
      PipelineState read;
      uint32_t phase = 0;  // of the tile's barrier phases: bias_full and hand_full complete one a tile
      for (; work.is_valid(); work = next(work)) {
        TiledMma tiled_mma;
        auto accumulators = partition_fragment_C(tiled_mma, take<0, 2>(TileShape{}));
        mainloop.mma(pipeline, read, accumulators, k_tiles, mma_thread_idx, shared.tensors.mainloop,
                     params.mainloop);
        mainloop.mma_tail(pipeline, read, k_tiles);
        read.advance(k_tiles);
        hand_over(shared, accumulators, mma_thread_idx, bias_full, hand_empty, hand_full, phase);
        last_m = work.M_idx;
        last_n = work.N_idx;
        last_phase = phase;
        phase ^= 1;
      }
    }
    // The last tile's epilogue hides under no mainloop: the consumers, done, take part. One code
    // path for both roles, so that the named barrier is one instruction (bar.sync is .aligned).
    if (last_m >= 0) {
      wait(hand_full, last_phase);
      finish_tile<kAllHands>(params, shared, last_m, last_n, worker, kAllHandsBarrier);
      if (worker == 0) cute::tma_store_wait<0>();  // H read out before the CTA exits
    }
#endif
  }

  // The consumers' stores of the tile into H: stmatrix, four 8×8 blocks of 16-bit values a
  // warp, partitioned by the TiledMma's accumulator layout.
  CUTLASS_HOST_DEVICE static auto hand_store() {
    using Store = Copy_Atom<SM90_U32x4_STSM_N, Element>;
    return make_tiled_copy_S(Store{}, make_tiled_copy_C_atom(Store{}, TiledMma{}));
  }

  // Consumers: H = T(acc + bias[j]) once H is free, then tell the epilogue warps.
  template <class Accumulators>
  CUTLASS_DEVICE static void hand_over(SharedStorage& shared, Accumulators const& acc, int mma_thread_idx,
                                       cutlass::arch::ClusterBarrier const& bias_full,
                                       cutlass::arch::ClusterBarrier const& hand_empty,
                                       cutlass::arch::ClusterBarrier const& hand_full, uint32_t phase) {
    Tensor hand = make_tensor(make_smem_ptr(shared.tensors.hand.data()), SmemLayoutTile{});
    const auto tiled_store = hand_store();
    auto thread_store = tiled_store.get_slice(mma_thread_idx);
    // The accumulators in the order the stores take them (value i of x lands where the store's
    // partition of H puts value i), and the (row, column) of each from the TiledMma that produced
    // them: tests/device/gemm/sm90_deferred_handoff_gpu_test.cu checks the two orders agree.
    Tensor acc_in_order = thread_store.retile_S(acc);
    Tensor coords = thread_store.retile_S(
        TiledMma{}.get_slice(mma_thread_idx).partition_C(make_identity_tensor(take<0, 2>(TileShape{}))));
    Tensor x = make_tensor<Element>(make_layout(shape(thread_store.partition_S(hand))));
    static_assert(size(decltype(x){}) == size(Accumulators{}));
    wait(bias_full, phase);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(x); ++i)
      x(i) = static_cast<Element>(acc_in_order(i) + shared.bias[get<1>(coords(i))]);
    // H is free once the tile before's stores have read it: hand_empty completes its phase a tile
    // after hand_full, so on the first tile the wait is on the phase before, complete from the start.
    wait(hand_empty, phase ^ 1);
    copy(tiled_store, x, thread_store.partition_D(hand));
    arrive(hand_full);
  }

  // mbarrier waits and arrives that also fence the compiler: the plain C++ accesses of the staged
  // bias stay on their side (CUTLASS's ClusterBarrier asm declares no memory clobber).
  CUTLASS_DEVICE static void wait(cutlass::arch::ClusterBarrier const& barrier, uint32_t phase) {
    barrier.wait(phase);
    asm volatile("" ::: "memory");
  }
  CUTLASS_DEVICE static void arrive(cutlass::arch::ClusterBarrier const& barrier) {
    asm volatile("" ::: "memory");
    barrier.arrive();
  }

  CUTLASS_DEVICE static uint4 load_shared(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr)
                 : "memory");
    return v;
  }
  CUTLASS_DEVICE static void store_shared(uint32_t addr, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }

  // y = gelu_tanh(x) [+ r] on a 16-byte chunk of T (r is zero without the residual).
  CUTLASS_DEVICE static uint4 activate(uint4 x_bits, uint4 r_bits) {
    using Chunk = cutlass::Array<Element, kChunk>;
    using ToFloat = cutlass::NumericArrayConverter<float, Element, kChunk>;
    using ToElement = cutlass::NumericArrayConverter<Element, float, kChunk, cutlass::FloatRoundStyle::round_to_nearest>;
    cutlass::Array<float, kChunk> y = ToFloat{}(reinterpret_cast<const Chunk&>(x_bits));
    if constexpr (kResidual) {
      const cutlass::Array<float, kChunk> r = ToFloat{}(reinterpret_cast<const Chunk&>(r_bits));
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < kChunk; ++v) y[v] = gelu_tanh_fast_add(y[v], r[v]);
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < kChunk; ++v) y[v] = gelu_tanh_fast(y[v]);
    }
    const Chunk out = ToElement{}(y);
    return reinterpret_cast<const uint4&>(out);
  }

  // Epilogue warps, before a tile's H is full: its bias for the consumers.
  CUTLASS_DEVICE static void stage_tile(Params const& params, SharedStorage& shared, int n_tile, int epi_thread,
                                        cutlass::arch::ClusterBarrier const& bias_full) {
    const int n = get<1>(params.problem);
    const int n0 = n_tile * kTileN;
    using Chunk = cutlass::Array<Element, kChunk>;
    // The tile's bias for the consumers (H of the tile before has been handed over, so they no
    // longer read the last one).
    if (epi_thread < kTileN / kChunk) {
      const int col = epi_thread * kChunk;
      Chunk b;
      b.clear();
      if (n0 + col < n) b = *reinterpret_cast<const Chunk*>(params.bias + n0 + col);
      *reinterpret_cast<cutlass::Array<float, kChunk>*>(shared.bias + col) =
          cutlass::NumericArrayConverter<float, Element, kChunk>{}(b);
    }
    arrive(bias_full);
  }

  // R's rows of one column block into L2 (a hint; nothing waits on it).
  // NOTE: measured on the H100 (session 44, ncu): the whole tile prefetched at the start of its
  // mainloop was gone from L2 by its epilogue, 47–96 µs later: DRAM read R twice (+130 MB at
  // 8192³). A block ahead is ~2 µs ahead.
  CUTLASS_DEVICE static void prefetch_residual_block(Params const& params, int m0, int n0, int block, int worker,
                                                     int workers) {
    const int m = get<0>(params.problem), n = get<1>(params.problem);
    const int col = n0 + block * kBlockN;
    const int row_bytes = min(kBlockN, n - col) * static_cast<int>(sizeof(Element));
    for (int r = worker; r < kTileM; r += workers)
      if (m0 + r < m && row_bytes > 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(params.residual + (m0 + r) * params.ldr + col),
                     "r"(row_bytes)
                     : "memory");
  }

  // D = T(gelu(H) [+ R]) for a full H, stored by TMA a column block at a time; `worker` of
  // kWorkers threads (worker 0, an epilogue thread, issues the stores).
  template <int kWorkers>
  CUTLASS_DEVICE static void finish_tile(Params const& params, SharedStorage& shared, int m_tile, int n_tile,
                                         int worker, int barrier_id) {
    const int m = get<0>(params.problem), n = get<1>(params.problem);
    const int m0 = m_tile * kTileM, n0 = n_tile * kTileN;
    const uint32_t hand_address = cute::cast_smem_ptr_to_uint(shared.tensors.hand.data());
    Tensor gD = params.tma_store_d.get_tma_tensor(make_shape(m, n));
    auto cta_store = params.tma_store_d.get_slice(Int<0>{});

    // A thread's chunks of a block share one column of chunks and step down the rows; it takes
    // kChunksInFlight of them a pass, their loads (H from shared memory, R from L2) issued before
    // any arithmetic: one warp per scheduler hides the loads' latency no other way.
    static_assert(kWorkers % kChunksPerBlockRow == 0, "a thread's chunks in a block share their column");
    constexpr int kRowStep = kWorkers / kChunksPerBlockRow;
    constexpr int kPassRows = kChunksInFlight * kRowStep;
    // A pass moves every chunk down by whole swizzle periods, so each chunk's XOR pattern (and
    // its H offset within the pass) is the same in every pass.
    static_assert(kPassRows % kSwizzleRows == 0, "a pass spans whole swizzle periods");
    const int chunk_col = worker % kChunksPerBlockRow;
    const int first_row = worker / kChunksPerBlockRow;
    uint32_t h_offset[kChunksInFlight];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < kChunksInFlight; ++j)
      h_offset[j] = swizzled_chunk_offset(static_cast<uint32_t>((first_row + j * kRowStep) * kChunksPerBlockRow + chunk_col));
    const int rows_in_matrix = min(kTileM, m - m0);
    // Every thread takes kPasses passes a block (the last one partial by rows).
    constexpr int kPasses = (kTileM + kPassRows - 1) / kPassRows;
    static_assert((kPasses - 1) * kPassRows + kRowStep <= kTileM, "every thread has a chunk in each pass");
    constexpr int kSteps = kBlocks * kPasses;
    // R's chunks of step (block, pass) start at r_row[j] + pass·kPassRows·ldr + block·kBlockN.
    const Element* r_row[kChunksInFlight];
    if constexpr (kResidual) {
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kChunksInFlight; ++j)
        r_row[j] = params.residual + (m0 + first_row + j * kRowStep) * params.ldr + n0 + chunk_col * kChunk;
    }
    // R's chunks of a step, or zeros past the matrix. The branches keep ptxas from sinking the
    // loads to their uses.
    const auto load_step = [&](int step, uint4 (&r)[kChunksInFlight]) {
      const int block = step / kPasses, pass = step % kPasses;
      const bool col_in_matrix = n0 + block * kBlockN + chunk_col * kChunk < n;
      const int64_t offset = pass * kPassRows * params.ldr + block * kBlockN;
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kChunksInFlight; ++j) {
        r[j] = make_uint4(0, 0, 0, 0);
        if (first_row + pass * kPassRows + j * kRowStep < rows_in_matrix && col_in_matrix)
          r[j] = __ldcs(reinterpret_cast<const uint4*>(r_row[j] + offset));
      }
    };
    // R runs a pass ahead of the arithmetic: a pass's loads wait out an L2 round trip under the
    // pass before's GELU (with them in the same pass, the epilogue warps took ~20 µs a tile,
    // longer than a K = 1024 mainloop: session 46, K sweep).
    uint4 r_next[kChunksInFlight];
    if constexpr (kResidual) {
      prefetch_residual_block(params, m0, n0, 0, worker, kWorkers);
      load_step(0, r_next);
    }
    CUTLASS_PRAGMA_NO_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      const int block = step / kPasses, pass = step % kPasses;
      if constexpr (kResidual)
        if (pass == 0 && block + 1 < kBlocks) prefetch_residual_block(params, m0, n0, block + 1, worker, kWorkers);
      uint4 r[kChunksInFlight];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kChunksInFlight; ++j) {
        if constexpr (kResidual) r[j] = r_next[j];
        else r[j] = make_uint4(0, 0, 0, 0);
      }
      if constexpr (kResidual)
        if (step + 1 < kSteps) load_step(step + 1, r_next);
      const int row = first_row + pass * kPassRows;
      const uint32_t pass_address = hand_address + block * kBlockBytes + pass * kPassRows * kSwizzleRowBytes;
      uint4 h[kChunksInFlight];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kChunksInFlight; ++j)
        if (row + j * kRowStep < kTileM) h[j] = load_shared(pass_address + h_offset[j]);
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kChunksInFlight; ++j)
        if (row + j * kRowStep < kTileM) store_shared(pass_address + h_offset[j], activate(h[j], r[j]));
      if (pass + 1 < kPasses) continue;
      // The block's generic-proxy writes, seen by the TMA unit's reads.
      cute::tma_store_fence();
      cutlass::arch::NamedBarrier::sync(kWorkers, barrier_id);
      if (worker == 0) {
        Tensor hand_block = make_tensor(make_smem_ptr(shared.tensors.hand.data() + block * kBlockElements),
                                        SmemLayoutBlock{});
        Tensor gD_block = local_tile(gD, Shape<Int<kTileM>, Int<kBlockN>>{}, make_coord(m_tile, n_tile * kBlocks + block));
        copy(params.tma_store_d, cta_store.partition_S(hand_block), cta_store.partition_D(gD_block));
        cute::tma_store_arrive();
      }
    }
  }
};

}  // namespace fusekit::device::sm90
