#pragma once
// The portable attention forward kernel (sm_80 and newer), FlashAttention-2 work split:
//   O = softmax(mask(softcap(scale·Q·Kᵀ)))·V,  LSE = log Σ_j exp(mask(softcap(scale·Q·Kᵀ)))
// One CTA owns a kBlockM-row tile of queries of one (batch, query head); each warp owns 16 of
// those rows for the whole key loop, so the softmax statistics of a row never leave its warp.
// Per key tile of kBlockN keys: S = Q·Kᵀ in fp32 registers (mma.sync m16n8k16), soft-cap and mask
// in registers, online softmax (running max m and sum ℓ, O rescaled by α = 2^(m_old − m_new)),
// P rounded to the input type in registers and fed straight back as the A operand of O += P·V.
// 1/ℓ is applied once at the end; O leaves through shared memory in 16-byte stores.
//
// Pipeline (one K and one V buffer): V of tile j loads while S = Q·K_jᵀ runs, and K of tile
// j + 1 loads while the softmax and P·V_j run. Shared-memory rows are XOR-swizzled in 16-byte
// chunks so every ldmatrix (ldmatrix.trans for V) is free of bank conflicts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/device/attention/sequence_view.cuh"
#include "fusekit/device/fast_math.cuh"
#include "fusekit/device/mma_sync.cuh"

namespace fusekit::device::attention {

inline constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;
inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;
inline constexpr int kElemBytes = 2;      // Q, K, V and O are 16-bit
inline constexpr int kChunkElems = 8;     // 16-bit elements per 16-byte chunk
inline constexpr int kHalfRows = kMmaM / 2;  // an accumulator's second row is 8 below its first
inline constexpr int kSwizzleChunks = 8;  // 8 chunks × 16 B: one pass over the 32 banks
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr float kMinusInf = -INFINITY;

// Tile shape per head dim: kBlockM query rows × kBlockN keys, kWarpBlocksM m16 row blocks per
// warp. Q fragments are re-read from shared memory at every k-step rather than held. Shared
// memory bandwidth bounds this kernel: one ldmatrix.x4 moves 512 bytes per warp and one m16n8k16
// mma does 4096 FLOP, so a K (or V) fragment that serves two m16 blocks instead of one halves
// the bytes per mma. Measured on an H200 (2026-11-29), D = 128, S = 16384: one m16 block per warp
// (8 warps, 128×32) gave 277 TFLOP/s against 343 for PyTorch's FlashAttention-2 backend.
//   D =  64: 128×64, 4 warps × 2 blocks, 32 KB shared: 246 registers, 2 CTAs per SM.
//   D = 128: 128×32, 4 warps × 2 blocks, 48 KB: 255 registers, no spills; kBlockN = 64 needs
//            64 more registers of S than there are.
//   D = 256: 64×64, 4 warps × 1 block, 96 KB: 255 registers (O alone takes 128); two blocks
//            per warp would need 256 registers of O. 310 TFLOP/s at S = 16384 on the H200.
// ptxas -v, sm_80 and sm_90a: no spills in any instantiation.
template <int kHeadDim> struct FlashForwardTile;
template <> struct FlashForwardTile<64> {
  static constexpr int kBlockM = 128, kBlockN = 64, kWarpBlocksM = 2, kMinBlocksPerSm = 2;
};
template <> struct FlashForwardTile<128> {
  static constexpr int kBlockM = 128, kBlockN = 32, kWarpBlocksM = 2, kMinBlocksPerSm = 2;
};
template <> struct FlashForwardTile<256> {
  static constexpr int kBlockM = 64, kBlockN = 64, kWarpBlocksM = 1, kMinBlocksPerSm = 2;
};

template <int kHeadDim>
struct FlashForwardShape {
  using Tile = FlashForwardTile<kHeadDim>;
  static constexpr int kBlockM = Tile::kBlockM, kBlockN = Tile::kBlockN;
  static constexpr int kWarpBlocksM = Tile::kWarpBlocksM;  // m16 row blocks per warp
  static constexpr int kWarpRows = kWarpBlocksM * kMmaM;   // query rows per warp
  static constexpr int kWarps = kBlockM / kWarpRows;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  static constexpr int kTileNs = kBlockN / kMmaN;    // n8 tiles of S per warp
  static constexpr int kTileDs = kHeadDim / kMmaN;   // n8 tiles of O per warp
  static constexpr int kSmemBytes = (kBlockM + 2 * kBlockN) * kHeadDim * kElemBytes;  // Q, K, V tiles
  static_assert(kChunksPerRow >= kSwizzleChunks, "rows must span all 32 banks for the swizzle");
  static_assert(kBlockM * kChunksPerRow % kThreads == 0 && kBlockN * kChunksPerRow % kThreads == 0,
                "every thread copies the same number of chunks");
};

// Swizzled element offset of (row, 16-byte chunk) in a [rows][kHeadDim] shared-memory tile.
template <int kHeadDim>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row % kSwizzleChunks)) * kChunkElems);
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Two floats rounded to T and packed into one 32-bit mma operand register (low half first).
template <class T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (MmaType<T>::kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
}

// Copies rows [0, kRows) of a [rows][kHeadDim] global tile into swizzled shared memory; rows at
// or beyond `valid_rows` are zero-filled (their scores are masked, and zero V rows keep 0·V finite).
// Each thread copies one chunk column, kRowsPerPass rows apart, from one base address.
template <class T, int kHeadDim, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(T* smem, const T* gmem, std::int64_t row_stride, int valid_rows) {
  constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0, "whole rows per pass");
  const int row = static_cast<int>(threadIdx.x) / kChunksPerRow, chunk = static_cast<int>(threadIdx.x) % kChunksPerRow;
  const T* gmem_chunk = gmem + row * row_stride + chunk * kChunkElems;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const int r = row + i * kRowsPerPass;
    const bool ok = r < valid_rows;
    // NOTE: a zero-filled chunk still gets a valid address: the tile's first row exists.
    cp_async_16(smem + swizzle<kHeadDim>(r, chunk), ok ? gmem_chunk + i * kRowsPerPass * row_stride : gmem, ok);
  }
}

// Shared-memory byte addresses of one lane's ldmatrix rows in a swizzled [rows][kHeadDim] tile.
// The lane reads row lane_row + row_offset (row_offset a multiple of 8, so the row's swizzle is
// the lane's) at logical chunk c + chunk_bit (c even). The swizzle flips only the low three chunk
// bits and rows are 128-byte multiples, so the address is the lane's base with an XOR and an add
// of constants: (base ^ 16·(c mod 8)) + row_offset·row_bytes + 16·(c − c mod 8). NOTE: swizzling
// each fragment's (row, chunk) instead gave a register per fragment address, hoisted out of the
// key loop (over 100 registers at D = 256).
template <int kHeadDim>
struct SwizzledLane {
  static constexpr int kRowBytes = kHeadDim * kElemBytes;
  static constexpr int kChunkBytes = kChunkElems * kElemBytes;
  unsigned base;

  __device__ __forceinline__ SwizzledLane(const void* smem_tile, int lane_row, int chunk_bit)
      : base(static_cast<unsigned>(__cvta_generic_to_shared(smem_tile)) + lane_row * kRowBytes +
             kChunkBytes * (chunk_bit ^ (lane_row % kSwizzleChunks))) {}
  __device__ __forceinline__ unsigned at(int row_offset, int chunk) const {
    const int low = chunk % kSwizzleChunks;
    return (base ^ (kChunkBytes * low)) + row_offset * kRowBytes + (chunk - low) * kChunkBytes;
  }
};

template <class T>
__device__ __forceinline__ const T* token_row(const void* base, const TokenStrides& s, int batch,
                                              std::int64_t token, int head) {
  return static_cast<const T*>(base) + batch * s.batch + token * s.token + head * s.head;
}

template <class T, int kHeadDim>
__global__ void __launch_bounds__(FlashForwardShape<kHeadDim>::kThreads, FlashForwardTile<kHeadDim>::kMinBlocksPerSm)
    flash_forward_kernel(const FlashForwardParams p) {
  using Shape = FlashForwardShape<kHeadDim>;
  constexpr int kBlockM = Shape::kBlockM, kBlockN = Shape::kBlockN, kThreads = Shape::kThreads;
  constexpr bool kBf16 = MmaType<T>::kBf16;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem_q = reinterpret_cast<T*>(smem_raw);
  T* smem_k = smem_q + kBlockM * kHeadDim;
  T* smem_v = smem_k + kBlockN * kHeadDim;

  // NOTE: the longest-running query tiles (the last ones, under a causal mask) start first.
  const int m_block = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y), batch = static_cast<int>(blockIdx.z);
  const SequenceView seq = sequence_view(p, batch);
  const int m0 = m_block * kBlockM;
  if (m0 >= seq.seqlen_q) return;  // varlen: this sequence is shorter than the longest
  const int kv_head = head / p.group;
  const int q_rows = min(kBlockM, seq.seqlen_q - m0);

  // Keys any row of this tile sees; tiles outside [n_begin, n_end) are fully masked and skipped.
  const int first_key = seq.first_key(m0), last_key = seq.last_key(m0 + q_rows - 1);
  const int n_begin = first_key / kBlockN;
  const int n_end = last_key >= first_key ? last_key / kBlockN + 1 : n_begin;

  const T* q = token_row<T>(p.q, p.q_strides, batch, seq.q_begin + m0, head);
  const T* k = token_row<T>(p.k, p.k_strides, batch, seq.k_begin, kv_head);
  const T* v = token_row<T>(p.v, p.v_strides, batch, seq.k_begin, kv_head);

  load_tile<T, kHeadDim, kBlockM, kThreads>(smem_q, q, p.q_strides.token, q_rows);
  if (n_begin < n_end) {
    const int n0 = n_begin * kBlockN;
    load_tile<T, kHeadDim, kBlockN, kThreads>(smem_k, k + n0 * p.k_strides.token, p.k_strides.token,
                                               seq.seqlen_k - n0);
  }
  cp_async_commit();

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  constexpr int kBlocksM = Shape::kWarpBlocksM, kWarpRows = Shape::kWarpRows;
  const int warp_row0 = warp * kWarpRows;
  // mma.sync fragment layout (PTX ISA, m16n8k16): this thread's accumulators sit in rows
  // lane/4 and lane/4 + 8 of each m16 block, columns 2·(lane%4) + {0, 1} of each n8 tile.
  const int frag_row = lane / 4, frag_col = 2 * (lane % 4);
  const int warp_first_row = m0 + warp_row0, warp_last_row = warp_first_row + kWarpRows - 1;

  // lanes 0-15: rows 0-15 of an m16 block of Q at chunk 2ks; lanes 16-31: the same rows at 2ks + 1
  const SwizzledLane<kHeadDim> lane_q(smem_q, warp_row0 + lane % 16, lane / 16);
  // matrices: (keys 0-7, d lo), (keys 0-7, d hi), (keys 8-15, d lo), (keys 8-15, d hi)
  const SwizzledLane<kHeadDim> lane_k(smem_k, (lane / 16) * kMmaN + lane % 8, (lane / 8) % 2);
  // matrices (transposed): (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15)
  const SwizzledLane<kHeadDim> lane_v(smem_v, ((lane / 8) % 2) * kMmaN + lane % 8, lane / 16);

  // Per m16 block mb and half h (rows lane/4 + 8h): O, the running max of the raw scores (before
  // scale_log2) and this thread's part of the running sum (the quad's is taken at the end).
  float acc_o[kBlocksM][Shape::kTileDs][4] = {};
  float row_max[kBlocksM][2], row_sum[kBlocksM][2];
#pragma unroll
  for (int mb = 0; mb < kBlocksM; ++mb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[mb][h] = kMinusInf;
      row_sum[mb][h] = 0.0f;
    }

  for (int n_block = n_begin; n_block < n_end; ++n_block) {
    const int n0 = n_block * kBlockN;
    // K_j has landed and every warp is past P·V_(j−1): V's buffer may be refilled.
    cp_async_wait<0>();
    __syncthreads();
    load_tile<T, kHeadDim, kBlockN, kThreads>(smem_v, v + n0 * p.v_strides.token, p.v_strides.token,
                                               seq.seqlen_k - n0);
    cp_async_commit();

    // S = Q·Kᵀ for the warp's rows and the tile's kBlockN keys; each K fragment serves every m16
    // block of the warp.
    float acc_s[kBlocksM][Shape::kTileNs][4] = {};
#pragma unroll
    for (int ks = 0; ks < kHeadDim / kMmaK; ++ks) {
      unsigned frag_q[kBlocksM][4];
#pragma unroll
      for (int mb = 0; mb < kBlocksM; ++mb) ldmatrix_x4(frag_q[mb], lane_q.at(mb * kMmaM, 2 * ks));
#pragma unroll
      for (int j = 0; j < Shape::kTileNs / 2; ++j) {
        unsigned frag_k[4];
        ldmatrix_x4(frag_k, lane_k.at(j * kMmaK, 2 * ks));
#pragma unroll
        for (int mb = 0; mb < kBlocksM; ++mb) {
          mma<kBf16>(acc_s[mb][2 * j], frag_q[mb], frag_k[0], frag_k[1]);
          mma<kBf16>(acc_s[mb][2 * j + 1], frag_q[mb], frag_k[2], frag_k[3]);
        }
      }
    }

    // V_j has landed and every warp is done with K_j: K's buffer takes tile j + 1.
    cp_async_wait<0>();
    __syncthreads();
    if (n_block + 1 < n_end) {
      const int next0 = n0 + kBlockN;
      load_tile<T, kHeadDim, kBlockN, kThreads>(smem_k, k + next0 * p.k_strides.token, p.k_strides.token,
                                                 seq.seqlen_k - next0);
    }
    cp_async_commit();

    if (p.softcap_scale != 0.0f) {
#pragma unroll
      for (int mb = 0; mb < kBlocksM; ++mb)
#pragma unroll
        for (int t = 0; t < Shape::kTileNs; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc_s[mb][t][e] = tanhf(acc_s[mb][t][e] * p.softcap_scale);
    }
    // Only tiles that cross a row's visible key range pay for the mask (warp-uniform test).
    const bool tile_visible_to_all = n0 >= seq.first_key(warp_last_row) && n0 + kBlockN - 1 <= seq.last_key(warp_first_row);
    if (!tile_visible_to_all) {
#pragma unroll
      for (int mb = 0; mb < kBlocksM; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp_first_row + mb * kMmaM + frag_row + h * kHalfRows;
          const int lo = seq.first_key(row), hi = seq.last_key(row);
#pragma unroll
          for (int t = 0; t < Shape::kTileNs; ++t)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int key = n0 + t * kMmaN + frag_col + e;
              if (key < lo || key > hi) acc_s[mb][t][2 * h + e] = kMinusInf;
            }
        }
    }

    // Online softmax per row: m_new = max(m_old, max_j s), α = 2^((m_old − m_new)·c),
    // p = 2^(s·c − m_new·c) with c = scale·log2(e) (one FFMA per score).
#pragma unroll
    for (int mb = 0; mb < kBlocksM; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tile_max = row_max[mb][h];
#pragma unroll
        for (int t = 0; t < Shape::kTileNs; ++t)
          tile_max = fmaxf(tile_max, fmaxf(acc_s[mb][t][2 * h], acc_s[mb][t][2 * h + 1]));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));  // the 4 lanes of a quad
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));  // hold one row
        // NOTE: a row that has seen no visible key keeps max −∞; subtracting 0 then gives p = 0
        // and α = 0 instead of exp2(−∞ + ∞) = NaN.
        const float max_scaled = tile_max == kMinusInf ? 0.0f : tile_max * p.scale_log2;
        const float alpha = fast_exp2(row_max[mb][h] * p.scale_log2 - max_scaled);
        row_max[mb][h] = tile_max;
        float sum = 0.0f;
#pragma unroll
        for (int t = 0; t < Shape::kTileNs; ++t)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = acc_s[mb][t][2 * h + e];
            x = fast_exp2(fmaf(x, p.scale_log2, -max_scaled));
            sum += x;
          }
        row_sum[mb][h] = row_sum[mb][h] * alpha + sum;
#pragma unroll
        for (int d = 0; d < Shape::kTileDs; ++d) {
          acc_o[mb][d][2 * h] *= alpha;
          acc_o[mb][d][2 * h + 1] *= alpha;
        }
      }

    // O += P·V: P's accumulator layout is the A-operand layout of the next mma, so the n8 tiles
    // 2kk and 2kk + 1 of S become the 16-key slice kk of P without leaving registers; each V
    // fragment serves every m16 block of the warp.
#pragma unroll
    for (int kk = 0; kk < kBlockN / kMmaK; ++kk) {
      unsigned frag_p[kBlocksM][4];
#pragma unroll
      for (int mb = 0; mb < kBlocksM; ++mb) {
        frag_p[mb][0] = pack2<T>(acc_s[mb][2 * kk][0], acc_s[mb][2 * kk][1]);
        frag_p[mb][1] = pack2<T>(acc_s[mb][2 * kk][2], acc_s[mb][2 * kk][3]);
        frag_p[mb][2] = pack2<T>(acc_s[mb][2 * kk + 1][0], acc_s[mb][2 * kk + 1][1]);
        frag_p[mb][3] = pack2<T>(acc_s[mb][2 * kk + 1][2], acc_s[mb][2 * kk + 1][3]);
      }
#pragma unroll
      for (int j = 0; j < Shape::kTileDs / 2; ++j) {
        unsigned frag_v[4];
        ldmatrix_x4_trans(frag_v, lane_v.at(kk * kMmaK, 2 * j));
#pragma unroll
        for (int mb = 0; mb < kBlocksM; ++mb) {
          mma<kBf16>(acc_o[mb][2 * j], frag_p[mb], frag_v[0], frag_v[1]);
          mma<kBf16>(acc_o[mb][2 * j + 1], frag_p[mb], frag_v[2], frag_v[3]);
        }
      }
    }
  }

  // Epilogue: O /= ℓ, LSE = (m·c + log2 ℓ)·ln 2. The Q rows of shared memory take the output tile;
  // the barrier also covers a CTA with no visible key, whose Q copy was never waited for.
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int mb = 0; mb < kBlocksM; ++mb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[mb][h];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      // NOTE: a row that sees no key has ℓ = 0: O = 0 and LSE = −∞, as in the reference.
      const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int tile_row = warp_row0 + mb * kMmaM + frag_row + h * kHalfRows;
#pragma unroll
      for (int d = 0; d < Shape::kTileDs; ++d) {
        const unsigned packed = pack2<T>(acc_o[mb][d][2 * h] * inv_sum, acc_o[mb][d][2 * h + 1] * inv_sum);
        *reinterpret_cast<unsigned*>(smem_q + swizzle<kHeadDim>(tile_row, d) + frag_col) = packed;
      }
      const int row = m0 + tile_row;
      if (p.lse != nullptr && lane % 4 == 0 && row < seq.seqlen_q) {
        const float lse = sum > 0.0f ? (row_max[mb][h] * p.scale_log2 + __log2f(sum)) * kLn2 : kMinusInf;
        p.lse[batch * p.lse_batch_stride + head * p.lse_head_stride + seq.q_begin + row] = lse;
      }
    }
  __syncwarp();
  // Each warp stores its own rows: 16-byte chunks, consecutive lanes along a row.
  T* o = static_cast<T*>(p.o) + batch * p.o_strides.batch + (seq.q_begin + m0) * p.o_strides.token +
         head * p.o_strides.head;
#pragma unroll
  for (int i = 0; i < kWarpRows * Shape::kChunksPerRow / kWarpSize; ++i) {
    const int c = i * kWarpSize + lane;
    const int tile_row = warp_row0 + c / Shape::kChunksPerRow, chunk = c % Shape::kChunksPerRow;
    if (tile_row >= q_rows) continue;
    const uint4 out = *reinterpret_cast<const uint4*>(smem_q + swizzle<kHeadDim>(tile_row, chunk));
    *reinterpret_cast<uint4*>(o + tile_row * p.o_strides.token + chunk * kChunkElems) = out;
  }
}

}  // namespace fusekit::device::attention
