#pragma once
// The portable Level-2 GEMM (sm_80 and newer): D[M, N_out] = chain(A[M,K] · B[N,K]ᵀ).
//
// Mainloop: a 128×128 block tile, 4 warps of 64×64 (CuTe's TiledMMA of mma.sync m16n8k16, fp32
// accumulation), K in steps of 64 through a 3-stage cp.async pipeline, two blocks per SM;
// shared-memory rows are XOR-swizzled in 16-byte chunks (CuTe's Swizzle<3,3,3>) so the ldmatrix
// reads are free of bank conflicts, and the fragments of k-step s + 1 are read while the mma of
// step s runs.
// Epilogue: the chain's uniform prefix runs on the accumulators in registers; then the tile is
// staged through a skewed fp32 shared-memory tile, at the (i, j) CuTe's partition of the tile
// gives each accumulator, and the position-dependent rest runs from there on blocks of 16-byte
// chunks (epilogue/chain_block.cuh) before coalesced 16-byte stores (8-byte stores of e4m3 after
// a final quantize node, whose amax takes one atomic per warp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include <cute/tensor.hpp>

#include "fusekit/device/amax.cuh"
#include "fusekit/device/convert.cuh"
#include "fusekit/device/epilogue/chain_block.cuh"
#include "fusekit/device/mma_sync.cuh"
#include "fusekit/device/vector.cuh"

namespace fusekit::device::portable {

// NOTE: CUTLASS's sm80 mma.sync GEMM measured on the H200 (session 9, docs/performance.md) sets
// the shape: 128×128×64 tiles of four 64×64 warps, 3 stages, two blocks per SM: 483 TFLOP/s at
// 4096³ bf16 with a plain epilogue (128×256×64, one block per SM: 492), while eight 64×32 warps
// per block reached 390. Two blocks per SM also let one block's epilogue overlap the other's
// mainloop.
inline constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 64;
inline constexpr int kStages = 3;
inline constexpr int kWarpsM = 2, kWarpsN = 2;
inline constexpr int kThreads = kWarpsM * kWarpsN * 32;
inline constexpr int kElemsPerChunk = kChunkBytes / 2;           // 16-bit inputs
inline constexpr int kChunksPerRow = kBlockK / kElemsPerChunk;   // 8
inline constexpr int kStageElems = (kBlockM + kBlockN) * kBlockK;
// NOTE: +8 floats of skew per row: consecutive rows start 8 banks apart, so the four rows a
// half-warp writes for one mma tile (rows lane/4, 8-byte pairs) land in distinct banks.
inline constexpr int kEpilogueLd = kBlockN + 8;
inline constexpr int kPipelineBytes = kStages * kStageElems * 2;
inline constexpr int kEpilogueBytes = kBlockM * kEpilogueLd * 4;
inline constexpr int kSmemBytes = kPipelineBytes > kEpilogueBytes ? kPipelineBytes : kEpilogueBytes;
inline constexpr int kHalfN = kBlockN / 2;  // a gated tile pairs its two halves
// NOTE: L2 locality: consecutive blocks walk down a group of 8 tile rows before moving right,
// so the B tiles they share stay in L2.
inline constexpr int kGroupRows = 8;

// The mma.sync atom (m16n8k16, A row-major and B column-major, fp32 accumulators) per input type.
template <class T> struct MmaAtom;
template <> struct MmaAtom<__nv_bfloat16> {
  using Atom = cute::SM80_16x8x16_F32BF16BF16F32_TN;
  using Element = cute::bfloat16_t;
};
template <> struct MmaAtom<__half> {
  using Atom = cute::SM80_16x8x16_F32F16F16F32_TN;
  using Element = cute::half_t;
};

// The block's warps, 2×2, each repeating its m16n8k16 atom over 64×64; the 32×32×16 permutation
// gives every warp 16 adjacent columns per repeat, so one ldmatrix.x4 reads B for two atoms.
template <class T>
using TiledMma = cute::TiledMMA<cute::MMA_Atom<typename MmaAtom<T>::Atom>,
                                cute::Layout<cute::Shape<cute::Int<kWarpsM>, cute::Int<kWarpsN>, cute::_1>>,
                                cute::Tile<cute::_32, cute::_32, cute::_16>>;

// One pipeline stage of an operand, [rows][kBlockK] with 16-byte chunks XOR-swizzled by row:
// element (row, k) sits at row·64 + ((k/8) ^ (row%8))·8 + k%8, as StageCopier writes it.
template <int kRows>
using StageLayout = decltype(cute::composition(
    cute::Swizzle<3, 3, 3>{},
    cute::make_layout(cute::make_shape(cute::Int<kRows>{}, cute::Int<kBlockK>{}, cute::Int<kStages>{}),
                      cute::make_stride(cute::Int<kBlockK>{}, cute::_1{}, cute::Int<kStageElems>{}))));

// D's element type: the inputs' T, or e4m3 when the chain ends with quantize_e4m3.
enum class Output : std::uint8_t { Same, E4M3 };

struct Params {
  const void* a; std::int64_t lda;
  const void* b; std::int64_t ldb;
  void* d; std::int64_t ldd;  // ldd in D's elements
  int m, n, k;
  Chain chain;
  Output output;
};

// The chain's nodes that run before D's store: all but a final quantize_e4m3, which the store
// applies itself (to the chunks inside the matrix only, so that no row past M enters amax).
__device__ __forceinline__ int nodes_before_store(const Params& p) {
  return p.output == Output::E4M3 ? p.chain.count - 1 : p.chain.count;
}

// q = e4m3(x · quant_scale), amax = max|x|: D's element at `at` from x.
__device__ __forceinline__ void store_quantized(__nv_fp8_e4m3* at, float x, float scale, float& amax) {
  amax = amax_step(amax, x);
  *at = float_to_e4m3(x * scale);
}

// Which columns of A·Bᵀ (rows of B) a block tile computes. Ungated, or gated with a block
// dividing kHalfN: the kBlockN columns from n0, their pairs inside the tile. Gated with a block
// that is a multiple of kHalfN: the tile's kHalfN output columns lie in one block, so its left
// half takes their gate columns and its right half the up columns one block further on.
struct TileColumns {
  int first;  // column of tile column 0
  int jump;   // distance from tile column c to tile column c + kHalfN
  int block;  // the gate block as the tile sees it (0 when ungated)
  __device__ __forceinline__ int global(int c) const { return first + (c / kHalfN) * jump + c % kHalfN; }
};

__device__ __forceinline__ TileColumns tile_columns(const Chain& chain, int tn) {
  const int n0 = tn * kBlockN;
  if (chain.gate == chain.count) return {n0, kHalfN, 0};
  const int block = static_cast<int>(chain.nodes[chain.gate].p0);
  if (block <= kHalfN) return {n0, kHalfN, block};
  const int out0 = tn * kHalfN;  // the tile's first output column
  return {2 * (out0 / block) * block + out0 % block, block, kHalfN};
}

// One thread's share of the copies global → shared of every stage: its 16-byte chunk `chunk`
// (fixed) of the block rows row0 + kRowStep·i, i < kCopies, for A and for B: 32-bit element
// offsets, strides and row predicates from the block's start, a k-tile adding kBlockK.
// NOTE: at 255 registers ptxas recomputed this state from the thread index and the kernel
// parameters at every k-tile (~21 instructions per copy, SASS, session 9); 32-bit offsets and
// `pinned` keep it in eight registers, ~7 instructions per copy.
inline constexpr int kRowStep = kThreads / kChunksPerRow;  // 16 rows apart
inline constexpr int kCopies = kBlockM / kRowStep;          // 8 chunks of A and 8 of B per stage
inline constexpr int kMmaK = 16;                             // the k of one mma.sync step
inline constexpr int kCopyParts = kBlockK / kMmaK;           // a stage's copies spread over its 4 k-steps
inline constexpr int kCopiesPerPart = kCopies / kCopyParts;
static_assert(kBlockM == kBlockN && kThreads % kChunksPerRow == 0 && kCopies % kCopyParts == 0);
static_assert(kHalfN % kRowStep == 0 && (kHalfN / kRowStep) % kCopiesPerPart == 0,
              "a gated tile's two halves hold whole copy rows, and a part's copies lie in one half");

// v, through an instruction ptxas cannot repeat: the value must stay in its register.
__device__ __forceinline__ int pinned(int v) {
  int r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
  return r;
}

template <class T>
struct StageCopier {
  int a_off;         // element offset from A of chunk `chunk` of block row row0, k-tile 0
  int b_off;         // the same in B, of tile column row0
  int a_step;        // kRowStep rows of A
  int b_step;        // kRowStep rows of B
  int b_jump;        // from tile column r to r + kHalfN in B (cols.jump rows)
  int k;             // the chunk's first column in k-tile 0
  unsigned smem;     // shared byte address of this thread's first chunk of stage 0
  unsigned rows;     // bit i: A row row0 + kRowStep·i inside the matrix; bit kCopies + i: B's

  __device__ __forceinline__ StageCopier(const Params& p, unsigned smem_base, int m0, const TileColumns& cols) {
    const int row0 = threadIdx.x / kChunksPerRow, chunk = threadIdx.x % kChunksPerRow;
    k = chunk * kElemsPerChunk;
    a_step = kRowStep * static_cast<int>(p.lda);
    b_step = kRowStep * static_cast<int>(p.ldb);
    b_jump = cols.jump * static_cast<int>(p.ldb);
    a_off = (m0 + row0) * static_cast<int>(p.lda) + k;
    b_off = (cols.first + row0) * static_cast<int>(p.ldb) + k;
    // The swizzle of (row0 + kRowStep·i, chunk) is that of (row0, chunk) plus i rows: kRowStep is
    // a multiple of the 8-row swizzle period.
    smem = smem_base + (row0 * kBlockK + ((chunk ^ (row0 % kChunksPerRow)) * kElemsPerChunk)) * sizeof(T);
    rows = 0;
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      rows |= unsigned(m0 + row0 + kRowStep * i < p.m) << i;
      rows |= unsigned(cols.global(row0 + kRowStep * i) < p.n) << (kCopies + i);
    }
    // Kept in registers, not recomputed per k-tile (the NOTE above).
    a_off = pinned(a_off), b_off = pinned(b_off), a_step = pinned(a_step), b_step = pinned(b_step);
    b_jump = pinned(b_jump), k = pinned(k), smem = pinned(smem), rows = pinned(rows);
  }

  // Part `part` of k-tile kt's copies into stage `stage`. Rows or K beyond the matrix are
  // zero-filled (K is a multiple of 8: a chunk is wholly inside or outside); a zero-filled copy
  // reads no byte, so its address may lie outside the matrix.
  __device__ __forceinline__ void copy(const Params& p, int stage, int kt, int part) const {
    constexpr int kHalfCopies = kHalfN / kRowStep;  // B copies per gated half
    constexpr int kRowsBytes = kRowStep * kBlockK * sizeof(T);  // kRowStep rows of a stage
    const bool k_ok = k + kt * kBlockK < p.k;
    const unsigned dst = smem + stage * kStageElems * sizeof(T);
    const int i0 = part * kCopiesPerPart;
    int a_at = a_off + kt * kBlockK + i0 * a_step;
    int b_at = b_off + kt * kBlockK + (i0 / kHalfCopies) * b_jump + (i0 % kHalfCopies) * b_step;
#pragma unroll
    for (int j = 0; j < kCopiesPerPart; ++j, a_at += a_step, b_at += b_step) {
      const int i = i0 + j;
      cp_async_16_shared(dst + i * kRowsBytes, static_cast<const T*>(p.a) + a_at, k_ok && (rows >> i & 1u));
      cp_async_16_shared(dst + kBlockM * kBlockK * sizeof(T) + i * kRowsBytes, static_cast<const T*>(p.b) + b_at,
                         k_ok && (rows >> (kCopies + i) & 1u));
    }
  }
};

// Whether the chain has a gated node: a gated tile's 128 accumulator columns make 64 outputs.
enum class ChainShape : std::uint8_t { Plain, Gated };

// The epilogue's share of a thread: output columns c0 … c0 + kE − 1 (one 16-byte chunk of T) of
// tile rows r0 + kRowStep·i; consecutive threads take consecutive chunks of a row.
template <class T, ChainShape kShape>
struct EpilogueChunks {
  static constexpr int kE = Vector<T>::kElements;
  static constexpr int kOutCols = kShape == ChainShape::Gated ? kHalfN : kBlockN;
  static constexpr int kPerRow = kOutCols / kE;
  static constexpr int kRowStep = kThreads / kPerRow;
  static constexpr int kRows = kBlockM / kRowStep;  // chunks per thread
  // Chunks the chain runs on together (a node dispatched once for all of them); gated, each
  // chunk holds its gate and up values.
  // NOTE: gated blocks of 8 chunks (128 values) spilled 32 bytes in the f16 kernel.
  static constexpr int kBlock = kShape == ChainShape::Gated ? 4 : 8;
  static_assert(kThreads % kPerRow == 0 && kRows % kBlock == 0);
};

// The kE floats of the staged tile at `at` (16-byte aligned: two vector loads).
template <int kE>
__device__ __forceinline__ void load_tile_chunk(const float* at, float (&v)[kE]) {
#pragma unroll
  for (int e = 0; e < kE; e += 4) {
    const float4 q = *reinterpret_cast<const float4*>(at + e);
    v[e] = q.x, v[e + 1] = q.y, v[e + 2] = q.z, v[e + 3] = q.w;
  }
}

// A thread's chunks whose outputs all lie inside the matrix: the position-dependent rest of the
// chain on kBlock chunks at a time, the tensors it reads loaded 16 bytes at a time, then 16-byte
// stores. Gated, a chunk's gate (and up) columns are consecutive: the gate block is a multiple
// of kE. A row past M takes the last row's position (its loads stay inside the tensors) and
// stores nothing.
// NOTE: value by value (a dtype switch and a scalar load per bias or residual element, each node
// dispatched per 8 values) the epilogue took 44 % of the kernel's warp samples at ~76
// instructions per output; on blocks, 7 % at ~13 (ncu, sessions 9 and 10; 331 → 428 TFLOP/s).
template <class T, ChainShape kShape>
__device__ __forceinline__ void store_full_chunks(const Params& p, const float* tile, int m0, const TileColumns& cols,
                                                  int r0, int c0, int j0, float& amax) {
  using Share = EpilogueChunks<T, kShape>;
  constexpr int kE = Share::kE, kBlock = Share::kBlock;
  constexpr bool kGated = kShape == ChainShape::Gated;
  const Chain& c = p.chain;
  int cg = c0, cu = c0;  // tile columns of the chunk's gate and up values
  if constexpr (kGated) {
    cg = 2 * (c0 / cols.block) * cols.block + c0 % cols.block;
    cu = cg + cols.block;
  }
  const int last = nodes_before_store(p);
#pragma unroll 1
  for (int i0 = 0; i0 < Share::kRows; i0 += kBlock) {
    float v[kBlock][kE], up[kBlock][kE];  // up: gated only
    BlockColumns<kBlock> out;
#pragma unroll
    for (int b = 0; b < kBlock; ++b) {
      const int r = r0 + (i0 + b) * Share::kRowStep;
      out.live[b] = m0 + r < p.m;
      out.row[b] = static_cast<std::uint32_t>(out.live[b] ? m0 + r : p.m - 1);
      out.col[b] = j0;
      load_tile_chunk(tile + r * kEpilogueLd + cg, v[b]);
      if constexpr (kGated) load_tile_chunk(tile + r * kEpilogueLd + cu, up[b]);
    }
    if constexpr (kGated) {
      BlockColumns<kBlock> gate = out, upper = out;
#pragma unroll
      for (int b = 0; b < kBlock; ++b) gate.col[b] = cols.global(cg), upper.col[b] = cols.global(cu);
      for (int k = c.uniform_prefix; k < c.gate; ++k) {
        apply_node<T, kE, kBlock>(c, c.nodes[k], v, gate, GlobalOperands<T, kE, kBlock>{c, gate}, amax);
        apply_node<T, kE, kBlock>(c, c.nodes[k], up, upper, GlobalOperands<T, kE, kBlock>{c, upper}, amax);
      }
      apply_gate<T>(c.nodes[c.gate], v, up);
    }
    for (int k = kGated ? c.gate + 1 : c.uniform_prefix; k < last; ++k)
      apply_node<T, kE, kBlock>(c, c.nodes[k], v, out, GlobalOperands<T, kE, kBlock>{c, out}, amax);
    if (p.output == Output::E4M3) {
      const float scale = *c.quant_scale;
#pragma unroll
      for (int b = 0; b < kBlock; ++b) {
        if (!out.live[b]) continue;
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          amax = amax_step(amax, v[b][e]);
          v[b][e] *= scale;
        }
        *reinterpret_cast<uint2*>(static_cast<__nv_fp8_e4m3*>(p.d) + std::int64_t{out.row[b]} * p.ldd + j0) =
            pack_floats<__nv_fp8_e4m3, kE>(v[b]).word;
      }
    } else {
#pragma unroll
      for (int b = 0; b < kBlock; ++b)
        if (out.live[b])
          *reinterpret_cast<uint4*>(static_cast<T*>(p.d) + std::int64_t{out.row[b]} * p.ldd + j0) =
              pack_floats<T, kE>(v[b]).word;
    }
  }
}

// A thread's chunks at the matrix's right edge (or gated with a gate block narrower than a
// chunk): value by value, only the columns inside the matrix.
template <class T, ChainShape kShape>
__device__ __forceinline__ void store_edge_chunks(const Params& p, const float* tile, int m0, const TileColumns& cols,
                                               int r0, int c0, int j0, float& amax) {
  using Share = EpilogueChunks<T, kShape>;
  constexpr int kE = Share::kE;
  const Chain& c = p.chain;
  const int n_out = kShape == ChainShape::Gated ? p.n / 2 : p.n;
  const int valid = min(n_out - j0, kE);
  const int last = nodes_before_store(p);
  for (int i = 0; i < Share::kRows; ++i) {
    const int r = r0 + i * Share::kRowStep;
    const std::int64_t gi = m0 + r;
    if (gi >= p.m) break;
    const std::int64_t at = gi * p.ldd + j0;
    for (int e = 0; e < valid; ++e) {
      float x;
      if constexpr (kShape == ChainShape::Gated) {
        // output column c pairs tile gate column 2k·block + r' with tile up column 2k·block + block + r'
        const int col = c0 + e, kb = col / cols.block, rr = col % cols.block;
        const int cg = 2 * kb * cols.block + rr, cu = cg + cols.block;
        const float g = apply_range(c, c.uniform_prefix, c.gate, tile[r * kEpilogueLd + cg], 0.0f, gi, cols.global(cg));
        const float u = apply_range(c, c.uniform_prefix, c.gate, tile[r * kEpilogueLd + cu], 0.0f, gi, cols.global(cu));
        x = apply_range(c, c.gate, last, g, u, gi, j0 + e);
      } else {
        x = apply_range(c, c.uniform_prefix, last, tile[r * kEpilogueLd + c0 + e], 0.0f, gi, j0 + e);
      }
      if (p.output == Output::E4M3) store_quantized(static_cast<__nv_fp8_e4m3*>(p.d) + at + e, x, *c.quant_scale, amax);
      else static_cast<T*>(p.d)[at + e] = Float<T>::store(x);
    }
  }
}

// The staged tile out through the chain's position-dependent rest.
template <class T, ChainShape kShape>
__device__ __forceinline__ void store_tile(const Params& p, const float* tile, int m0, int tn,
                                           const TileColumns& cols, float& amax) {
  using Share = EpilogueChunks<T, kShape>;
  const int c0 = static_cast<int>(threadIdx.x % Share::kPerRow) * Share::kE;
  const int r0 = static_cast<int>(threadIdx.x / Share::kPerRow);
  const int j0 = tn * Share::kOutCols + c0;
  const int n_out = kShape == ChainShape::Gated ? p.n / 2 : p.n;
  if (j0 + Share::kE <= n_out && (kShape == ChainShape::Plain || cols.block >= Share::kE))
    store_full_chunks<T, kShape>(p, tile, m0, cols, r0, c0, j0, amax);
  else if (j0 < n_out)
    store_edge_chunks<T, kShape>(p, tile, m0, cols, r0, c0, j0, amax);
}

template <class T>
__global__ void __launch_bounds__(kThreads, 2) gemm_kernel(const Params p) {
  using namespace cute;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  using Element = typename MmaAtom<T>::Element;

  // Tile order grouped for L2 reuse.
  const int tiles_m = (p.m + kBlockM - 1) / kBlockM, tiles_n = (p.n + kBlockN - 1) / kBlockN;
  const int block_tile = blockIdx.x;
  const int group = block_tile / (kGroupRows * tiles_n);
  const int first_m = group * kGroupRows;
  const int rows_in_group = min(tiles_m - first_m, kGroupRows);
  const int in_group = block_tile % (kGroupRows * tiles_n);
  const int tm = first_m + in_group % rows_in_group;
  const int tn = in_group / rows_in_group;
  const int m0 = tm * kBlockM;
  const TileColumns cols = tile_columns(p.chain, tn);

  // Shared stages as CuTe sees them: (rows, k, stage), the same swizzle StageCopier writes.
  auto* smem_elems = reinterpret_cast<Element*>(smem_raw);
  Tensor s_a = make_tensor(make_smem_ptr(smem_elems), StageLayout<kBlockM>{});
  Tensor s_b = make_tensor(make_smem_ptr(smem_elems + kBlockM * kBlockK), StageLayout<kBlockN>{});

  TiledMma<T> tiled_mma;
  auto thr_mma = tiled_mma.get_slice(threadIdx.x);
  Tensor r_a = thr_mma.partition_fragment_A(s_a(_, _, 0));  // (mma, mma_m, mma_k)
  Tensor r_b = thr_mma.partition_fragment_B(s_b(_, _, 0));  // (mma, mma_n, mma_k)
  Tensor acc = partition_fragment_C(tiled_mma, Shape<Int<kBlockM>, Int<kBlockN>>{});  // (mma, mma_m, mma_n)
  clear(acc);

  // ldmatrix views: the shared stages as each thread reads them, and its fragments as they land.
  auto s2r_a = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, tiled_mma);
  auto s2r_b = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, tiled_mma);
  auto thr_s2r_a = s2r_a.get_slice(threadIdx.x);
  auto thr_s2r_b = s2r_b.get_slice(threadIdx.x);
  Tensor s2r_src_a = thr_s2r_a.partition_S(s_a);  // (copy, copy_m, copy_k, stage)
  Tensor s2r_dst_a = thr_s2r_a.retile_D(r_a);     // (copy, copy_m, copy_k)
  Tensor s2r_src_b = thr_s2r_b.partition_S(s_b);
  Tensor s2r_dst_b = thr_s2r_b.retile_D(r_b);
  constexpr int kSteps = size<2>(r_a);  // k-steps of 16 per stage

  const int k_tiles = (p.k + kBlockK - 1) / kBlockK;
  const StageCopier<T> copier(p, static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)), m0, cols);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles)
#pragma unroll
      for (int part = 0; part < kCopyParts; ++part) copier.copy(p, s, s, part);
    cp_async_commit();
  }
  cp_async_wait<kStages - 2>();
  __syncthreads();
  int read_stage = 0;
  copy(s2r_a, s2r_src_a(_, _, 0, read_stage), s2r_dst_a(_, _, 0));
  copy(s2r_b, s2r_src_b(_, _, 0, read_stage), s2r_dst_b(_, _, 0));

  static_assert(kSteps == kCopyParts);
  for (int kt = 0; kt < k_tiles; ++kt) {
    // This k-tile refills the stage consumed by the last one (every warp read its last fragments
    // before the barrier that ended it), a part per k-step.
    const int refill = kt + kStages - 1;
    const int refill_stage = refill % kStages;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      if (refill < k_tiles) copier.copy(p, refill_stage, refill, ks);
      if (ks == kSteps - 1) {
        cp_async_commit();
        // The next stage must have landed, and every warp be done with this one, before the
        // fragments of its first k-step are read.
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
        cp_async_wait<kStages - 2>();
        __syncthreads();
      }
      const int ks_next = (ks + 1) % kSteps;
      copy(s2r_a, s2r_src_a(_, _, ks_next, read_stage), s2r_dst_a(_, _, ks_next));
      copy(s2r_b, s2r_src_b(_, _, ks_next, read_stage), s2r_dst_b(_, _, ks_next));
      gemm(tiled_mma, acc, r_a(_, _, ks), r_b(_, _, ks), acc);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory becomes the epilogue tile

  // Uniform prefix in registers: the value alone decides, so the fragment layout is irrelevant.
  // Then stage each accumulator at the (i, j) that CuTe's partition of the tile gives it; values
  // 2v and 2v + 1 of an m16n8 atom are adjacent columns of one row: one 8-byte store.
  apply_prefix_fragment<decltype(size(acc))::value>(p.chain, acc);
  float* tile = reinterpret_cast<float*>(smem_raw);
  Tensor tile_coords = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
#pragma unroll
  for (int v = 0; v < size(acc); v += 2) {
    const int r = get<0>(tile_coords(v)), c = get<1>(tile_coords(v));
    *reinterpret_cast<float2*>(tile + r * kEpilogueLd + c) = make_float2(acc(v), acc(v + 1));
  }
  __syncthreads();

  // Position-dependent rest, then 16-byte stores.
  float amax = 0.0f;  // max|x| before a final quantize node, over this thread's outputs
  if (p.chain.gate < p.chain.count) store_tile<T, ChainShape::Gated>(p, tile, m0, tn, cols, amax);
  else store_tile<T, ChainShape::Plain>(p, tile, m0, tn, cols, amax);
  if (p.output == Output::E4M3 && p.chain.amax != nullptr) warp_atomic_amax(p.chain.amax, amax);
}

}  // namespace fusekit::device::portable
