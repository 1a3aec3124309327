#pragma once
// The portable Level-2 GEMM (sm_80 and newer): D[M, N_out] = chain(A[M,K] · B[N,K]ᵀ).
//
// Mainloop: a 128×128 block tile, 8 warps of 64×32, K in steps of 64 through a 3-stage cp.async
// pipeline, two blocks per SM; shared-memory rows are XOR-swizzled in 16-byte chunks so ldmatrix reads are free of
// bank conflicts; mma.sync m16n8k16 with fp32 accumulation.
// Epilogue: the chain's uniform prefix runs on the accumulators in registers; then the tile is
// staged through a skewed fp32 shared-memory tile, where every element's (i, j) is known, and
// the position-dependent rest runs there before coalesced 16-byte stores.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "fusekit/device/convert.cuh"
#include "fusekit/device/epilogue/chain.cuh"
#include "fusekit/device/vector.cuh"

namespace fusekit::device::portable {

// NOTE: a 128×256 tile with 64×64 warp tiles (227 registers, one 8-warp block per SM) measured
// 140 TFLOP/s at 4096³ against 222 for this one: with one block per SM nothing hides the
// cp.async waits. Two 128×128 blocks per SM keep 16 warps resident.
inline constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 64;
inline constexpr int kStages = 3;
inline constexpr int kWarpsM = 2, kWarpsN = 4;
inline constexpr int kThreads = kWarpsM * kWarpsN * 32;
inline constexpr int kWarpM = kBlockM / kWarpsM;  // 64
inline constexpr int kWarpN = kBlockN / kWarpsN;  // 32
inline constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;
inline constexpr int kTilesM = kWarpM / kMmaM;  // 4
inline constexpr int kTilesN = kWarpN / kMmaN;  // 4
inline constexpr int kChunkBytes = 16;
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

template <class T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> { static constexpr bool kBf16 = true; };
template <> struct MmaType<__half> { static constexpr bool kBf16 = false; };

struct Params {
  const void* a; std::int64_t lda;
  const void* b; std::int64_t ldb;
  void* d; std::int64_t ldd;
  int m, n, k;
  Chain chain;
};

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

// Swizzled element offset of (row, 16-byte chunk) in a [rows][kBlockK] tile.
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * kBlockK + ((chunk ^ (row % kChunksPerRow)) * kElemsPerChunk);
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? kChunkBytes : 0;  // 0: zero-fill (rows or K beyond the matrix)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Loads k-tile `kt` of A (rows m0..) and B (the rows `cols` names) into pipeline stage `stage`.
template <class T>
__device__ __forceinline__ void load_stage(const Params& p, T* smem, int stage, int kt, int m0,
                                           const TileColumns& cols) {
  T* sa = smem + stage * kStageElems;
  T* sb = sa + kBlockM * kBlockK;
  const auto* a = static_cast<const T*>(p.a);
  const auto* b = static_cast<const T*>(p.b);
  // NOTE: K is a multiple of 8, so a 16-byte chunk is wholly inside or outside the matrix; an
  // outside chunk is zero-filled, and still gets a valid address (row 0, column 0 exist).
#pragma unroll
  for (int c = threadIdx.x; c < kBlockM * kChunksPerRow; c += kThreads) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    const int k = kt * kBlockK + chunk * kElemsPerChunk;
    const bool ok = m0 + row < p.m && k < p.k;
    cp_async_16(sa + swizzle(row, chunk), a + (ok ? std::int64_t(m0 + row) * p.lda + k : 0), ok);
  }
#pragma unroll
  for (int c = threadIdx.x; c < kBlockN * kChunksPerRow; c += kThreads) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    const int k = kt * kBlockK + chunk * kElemsPerChunk;
    const int n = cols.global(row);
    const bool ok = n < p.n && k < p.k;
    cp_async_16(sb + swizzle(row, chunk), b + (ok ? std::int64_t(n) * p.ldb + k : 0), ok);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, 2) gemm_kernel(const Params p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  constexpr bool kBf16 = MmaType<T>::kBf16;

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

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / kWarpsN) * kWarpM, wn = (warp % kWarpsN) * kWarpN;

  float acc[kTilesM][kTilesN][4] = {};
  const int k_tiles = (p.k + kBlockK - 1) / kBlockK;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(p, smem, s, s, m0, cols);
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    // Refill the stage consumed last iteration (every warp is past it after the barrier).
    const int next = kt + kStages - 1;
    if (next < k_tiles) load_stage(p, smem, next % kStages, next, m0, cols);
    cp_async_commit();

    const T* sa = smem + (kt % kStages) * kStageElems;
    const T* sb = sa + kBlockM * kBlockK;
#pragma unroll
    for (int ks = 0; ks < kBlockK / kMmaK; ++ks) {
      unsigned af[kTilesM][4];
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
        // lanes 0-15: rows 0-15 at k chunk 2ks; lanes 16-31: the same rows at chunk 2ks+1
        const int row = wm + i * kMmaM + lane % 16;
        ldmatrix_x4(af[i], sa + swizzle(row, ks * 2 + lane / 16));
      }
      // NOTE: B fragments are loaded one pair of n8 tiles at a time, keeping 4 registers live,
      // not 8: with the 64 accumulators that keeps the kernel under 128 registers (2 blocks/SM).
#pragma unroll
      for (int j = 0; j < kTilesN / 2; ++j) {
        unsigned bf[4];
        // matrices: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), (n 8-15, k hi)
        const int row = wn + j * 2 * kMmaN + (lane / 16) * kMmaN + lane % 8;
        ldmatrix_x4(bf, sb + swizzle(row, ks * 2 + (lane / 8) % 2));
#pragma unroll
        for (int i = 0; i < kTilesM; ++i) {
          mma<kBf16>(acc[i][2 * j], af[i], bf[0], bf[1]);
          mma<kBf16>(acc[i][2 * j + 1], af[i], bf[2], bf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's shared memory becomes the epilogue tile

  // Uniform prefix in registers: the value alone decides, so the fragment layout is irrelevant.
  // Then stage: the mma.sync accumulator layout (PTX ISA, m16n8 f32 fragment) puts c0,c1 at row
  // lane/4, columns 2·(lane%4) + {0,1}, and c2,c3 eight rows below.
  float* tile = reinterpret_cast<float*>(smem_raw);
#pragma unroll
  for (int i = 0; i < kTilesM; ++i)
#pragma unroll
    for (int j = 0; j < kTilesN; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // (c0, c1) and, eight rows below, (c2, c3): one 8-byte store each
        const int r = wm + i * kMmaM + lane / 4 + half * 8;
        const int c = wn + j * kMmaN + (lane % 4) * 2;
        *reinterpret_cast<float2*>(tile + r * kEpilogueLd + c) =
            make_float2(apply_prefix(p.chain, acc[i][j][2 * half]), apply_prefix(p.chain, acc[i][j][2 * half + 1]));
      }
  __syncthreads();

  // Position-dependent rest, then 16-byte stores: each thread owns 8 consecutive output columns.
  const Chain& chain = p.chain;
  const bool gated = chain.gate < chain.count;
  const int block = cols.block;
  const int out_cols = gated ? kHalfN : kBlockN;
  const int n_out = gated ? p.n / 2 : p.n;
  const int out_n0 = tn * out_cols;
  constexpr int kVec = kChunkBytes / sizeof(T);
  auto* d = static_cast<T*>(p.d);
  for (int v = threadIdx.x; v < kBlockM * out_cols / kVec; v += kThreads) {
    const int r = v / (out_cols / kVec), c0 = (v % (out_cols / kVec)) * kVec;
    const std::int64_t gi = m0 + r;
    if (gi >= p.m) continue;
    Vector<T> out;
    const int left = n_out - (out_n0 + c0);  // output columns from c0 on inside the matrix
    const int valid = left < kVec ? left : kVec;
    const bool full = valid == kVec;
    if (!gated) {
      float x[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[e] = tile[r * kEpilogueLd + c0 + e];
      apply_range_columns(chain, chain.uniform_prefix, chain.count, x, nullptr, gi, out_n0 + c0, valid);
#pragma unroll
      for (int e = 0; e < kVec; ++e) out.e[e] = Float<T>::store(x[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float x = 0.0f;
        if (e < valid) {
          // output column c pairs tile gate column 2k·block + r' with tile up column 2k·block + block + r'
          const int c = c0 + e;
          const int kb = c / block, rr = c % block;
          const int cg = 2 * kb * block + rr, cu = cg + block;
          const float g = apply_range(chain, chain.uniform_prefix, chain.gate, tile[r * kEpilogueLd + cg], 0.0f, gi,
                                      cols.global(cg));
          const float u = apply_range(chain, chain.uniform_prefix, chain.gate, tile[r * kEpilogueLd + cu], 0.0f, gi,
                                      cols.global(cu));
          x = apply_range(chain, chain.gate, chain.count, g, u, gi, out_n0 + c);
        }
        out.e[e] = Float<T>::store(x);
      }
    }
    T* dst = d + gi * p.ldd + out_n0 + c0;
    if (full) {
      *reinterpret_cast<uint4*>(dst) = out.raw;
    } else {
      for (int e = 0; e < kVec; ++e)
        if (out_n0 + c0 + e < n_out) dst[e] = out.e[e];
    }
  }
}

}  // namespace fusekit::device::portable
