#pragma once
// A row's slice held in registers by the threads of a row layout (device/row/row_config.hpp),
// and row addressing of rank-2 [rows, n] and rank-3 [batch, rows, n] tensors.
//
// Chunk i of thread t starts at column begin + (i·threads + t)·V (V elements per 16 bytes, and
// `threads` the row's threads), so each load instruction of a warp covers contiguous bytes, and
// all kChunks loads of a thread are issued before the first is used.
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "fusekit/device/convert.cuh"
#include "fusekit/device/pointwise/map2d.cuh"
#include "fusekit/device/row/row_config.hpp"

namespace fusekit::device {

// Vector: every pointer and row stride of the launch is 16-byte aligned (and 16-byte aligned
// chunks of a narrower output) and the row length is a whole number of chunks, so a chunk is
// either wholly inside the row or wholly past it; Whole: Vector where, besides, every chunk a
// thread holds lies inside its row (the row is exactly the layout's slices) and every row a CTA
// holds exists, so no chunk is tested against the row length; Scalar: element by element, any
// alignment and length; Shifted: every tensor's row starts the same number of elements s past a
// 16-byte boundary (0 <= s < V, the row's phase, row by row), so chunks start s columns before the
// row (column c = kV − s): whole chunks inside the row are 16-byte accesses and only the first
// and last chunk are read element by element (odd lengths, views offset by whole elements). A
// kernel is compiled for one of them.
// NOTE: with both paths in one kernel, behind a run-time test per chunk, the scalar path's
// registers pushed the norm kernels past 64 and they spilled. The chunk tests of Vector (a compare,
// a branch and the zero fill of each load) were a quarter of the instructions of the register-row
// norms at 4096 columns (ncu, session 11).
enum class Access : std::uint8_t { Vector, Scalar, Whole, Shifted };

// Whether the chunk starting at column c has any column in a row of n columns (always, for Whole;
// a shifted chunk starts at most V − 1 columns before the row).
template <Access kAccess>
__device__ __forceinline__ bool chunk_in_row(int c, int n) {
  if constexpr (kAccess == Access::Whole) return true;
  else return c < n;
}

// Whether every element of the kE-element chunk starting at column c lies in a row of n columns.
template <Access kAccess, int kE>
__device__ __forceinline__ bool chunk_whole(int c, int n) {
  if constexpr (kAccess == Access::Whole) return true;
  else if constexpr (kAccess == Access::Vector) return c < n;
  else return c >= 0 && c + kE <= n;
}

// Whether element e of the chunk starting at column c lies in a row of n columns (always, for
// vector chunks: a row holds them whole or not at all).
template <Access kAccess>
__device__ __forceinline__ bool element_in_row(int c, int e, int n) {
  if constexpr (kAccess == Access::Scalar) return c + e < n;
  // One unsigned compare: a column before the row (c + e < 0) wraps past n.
  else if constexpr (kAccess == Access::Shifted) return static_cast<unsigned>(c + e) < static_cast<unsigned>(n);
  else return true;
}

// The phase of a row starting at `row` (Access::Shifted): how many elements it starts past a
// 16-byte boundary.
template <class T>
__device__ __forceinline__ int row_phase(const T* row) {
  return static_cast<int>(reinterpret_cast<std::uintptr_t>(row) % kChunkBytes / sizeof(T));
}

// One tensor's rows: row r of batch b at data + b·batch_stride + r·row_stride (in elements).
struct RowAddress {
  void* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t batch_stride = 0;

  // NOTE: row indices fit 32 bits (the launcher checks), so the division is a 32-bit one
  // instead of a call to the 64-bit division routine; rows of the first batch (all of them, for
  // the usual unbatched tensor) skip it: in a norm forward CTA's prologue it delays the row's
  // loads (LayerNorm 32768×4096 bf16: 3.79 → 3.87 TB/s with it skipped, session 5).
  template <class T>
  __device__ T* row(std::int64_t index, std::int64_t rows_per_batch) const {
    const auto r = static_cast<std::uint32_t>(index);
    const auto per_batch = static_cast<std::uint32_t>(rows_per_batch);
    return at<T>(r < per_batch ? 0u : r / per_batch, r, per_batch);
  }
  // row() with the division always done. NOTE: in the norm backward's row loop (the next row's
  // address computed while this one is reduced) row()'s branch cost 21 % (3.42 → 2.70 TB/s at
  // 32768×4096 bf16, session 5).
  template <class T>
  __device__ T* row_divided(std::int64_t index, std::int64_t rows_per_batch) const {
    const auto r = static_cast<std::uint32_t>(index);
    const auto per_batch = static_cast<std::uint32_t>(rows_per_batch);
    return at<T>(r / per_batch, r, per_batch);
  }

 private:
  template <class T>
  __device__ T* at(std::uint32_t batch, std::uint32_t r, std::uint32_t per_batch) const {
    const std::uint32_t within = r - batch * per_batch;
    return static_cast<T*>(data) + std::int64_t{batch} * batch_stride + std::int64_t{within} * row_stride;
  }
};

// float <-> element, including the fp8 outputs of the quantizing norms.
template <class T>
struct Element {
  __device__ static float load(T v) { return Float<T>::load(v); }
  __device__ static T store(float v) { return Float<T>::store(v); }
};
template <>
struct Element<__nv_fp8_e4m3> {
  __device__ static float load(__nv_fp8_e4m3 v) { return float(v); }
  __device__ static __nv_fp8_e4m3 store(float v) { return float_to_e4m3(v); }
};

template <int kBytes> struct WordOf;
template <> struct WordOf<16> { using Type = uint4; };
template <> struct WordOf<8> { using Type = uint2; };
template <> struct WordOf<4> { using Type = unsigned int; };
template <> struct WordOf<2> { using Type = unsigned short; };
template <> struct WordOf<1> { using Type = unsigned char; };

// A 4-, 8- or 16-byte word from its 32-bit parts, in registers.
template <class Word, int kWords>
__device__ __forceinline__ Word word_of(const std::uint32_t (&w)[kWords]) {
  if constexpr (std::is_same_v<Word, unsigned int>) return w[0];
  else if constexpr (std::is_same_v<Word, uint2>) return make_uint2(w[0], w[1]);
  else return make_uint4(w[0], w[1], w[2], w[3]);
}

// kElements values of type T stored as one word (a 16-, 8- or 4-byte access).
template <class T, int kElements>
union Pack {
  using Word = typename WordOf<kElements * sizeof(T)>::Type;
  Word word;
  T e[kElements];
};

// How bf16 values in the low half of a 32-bit word are widened to floats: by a shift (the ALU
// pipe) or by a multiply by 2^16 (IMAD: the FMA pipe, for kernels whose ALU pipe is the busier).
enum class Bf16Widen : std::uint8_t { Shift, Multiply };
// 2^16 where ptxas cannot see it: a literal multiplier is turned back into a shift.
static __constant__ std::uint32_t kBf16WidenMultiplier = 1u << 16;

// The kE values of `pack` as floats. NOTE: 16-bit types convert a 32-bit word (two values) at a
// time: element by element, the odd bf16 values went through 64-bit shifts (SHF.R.U64 + a shift,
// SASS of the norm kernels, session 4); from a word, bf16 is one shift (or multiply, kWiden) or
// one mask per value.
template <class T, int kE, Bf16Widen kWiden = Bf16Widen::Shift>
__device__ __forceinline__ void unpack_floats(const Pack<T, kE>& pack, float (&v)[kE]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16> && kE % 2 == 0) {
    const auto* word = reinterpret_cast<const std::uint32_t*>(&pack);
#pragma unroll
    for (int i = 0; i < kE / 2; ++i) {
      v[2 * i] = __uint_as_float(kWiden == Bf16Widen::Shift ? word[i] << 16 : word[i] * kBf16WidenMultiplier);
      v[2 * i + 1] = __uint_as_float(word[i] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int e = 0; e < kE; ++e) v[e] = Element<T>::load(pack.e[e]);
  }
}

// The kE floats rounded to T (round to nearest even), two per conversion for 16-bit types and
// e4m3.
template <class T, int kE>
__device__ __forceinline__ Pack<T, kE> pack_floats(const float (&v)[kE]) {
  Pack<T, kE> pack;
  if constexpr (std::is_same_v<T, __nv_bfloat16> && kE % 2 == 0) {
    auto* pair = reinterpret_cast<__nv_bfloat162*>(&pack);
#pragma unroll
    for (int i = 0; i < kE / 2; ++i) pair[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  } else if constexpr (std::is_same_v<T, __half> && kE % 2 == 0) {
    auto* pair = reinterpret_cast<__half2*>(&pack);
#pragma unroll
    for (int i = 0; i < kE / 2; ++i) pair[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
  } else if constexpr (std::is_same_v<T, __nv_fp8_e4m3> && kE % 4 == 0) {
    // NOTE: the pairs are joined into 32-bit words in registers: written into the union as 2-byte
    // pieces, every chunk went through an 8-byte stack frame (STL + LDL before each store, SASS of
    // the quantizing norms, session 11).
    std::uint32_t words[kE / 4];
#pragma unroll
    for (int i = 0; i < kE / 4; ++i) {
      const std::uint32_t low = float2_to_e4m3x2(v[4 * i], v[4 * i + 1]);
      const std::uint32_t high = float2_to_e4m3x2(v[4 * i + 2], v[4 * i + 3]);
      words[i] = low | high << 16;
    }
    pack.word = word_of<typename Pack<T, kE>::Word>(words);
  } else {
#pragma unroll
    for (int e = 0; e < kE; ++e) pack.e[e] = Element<T>::store(v[e]);
  }
  return pack;
}

enum class Cache : std::uint8_t {
  Stream,  // read once: evict first (activations)
  Keep,    // read by every row: keep in L1/L2 (weights)
};

// Loads the kElements values at columns [c, c + kElements) of `row`; columns outside [0, n) read
// as 0.
template <class T, int kElements, Cache kCache, Access kAccess>
__device__ inline Pack<T, kElements> load_pack(const T* row, int c, int n) {
  using P = Pack<T, kElements>;
  P p;
  const auto elementwise = [&] {
#pragma unroll
    for (int e = 0; e < kElements; ++e)
      p.e[e] = element_in_row<kAccess>(c, e, n) ? row[c + e] : Element<T>::store(0.0f);
  };
  if constexpr (kAccess != Access::Scalar) {
    const auto* w = reinterpret_cast<const typename P::Word*>(row + c);
    if (chunk_whole<kAccess, kElements>(c, n)) {
      if constexpr (kCache == Cache::Stream) p.word = __ldcs(w);
      else p.word = __ldg(w);
    } else if constexpr (kAccess == Access::Shifted) {
      elementwise();
    } else {
#pragma unroll
      for (int e = 0; e < kElements; ++e) p.e[e] = Element<T>::store(0.0f);
    }
  } else {
    elementwise();
  }
  return p;
}

// Stores the columns of [c, c + kElements) that are < n.
template <class T, int kElements, Access kAccess>
__device__ inline void store_pack(T* row, int c, int n, const Pack<T, kElements>& p) {
  using P = Pack<T, kElements>;
  const auto elementwise = [&] {
#pragma unroll
    for (int e = 0; e < kElements; ++e)
      if (element_in_row<kAccess>(c, e, n)) row[c + e] = p.e[e];
  };
  if constexpr (kAccess != Access::Scalar) {
    if (chunk_whole<kAccess, kElements>(c, n)) __stcs(reinterpret_cast<typename P::Word*>(row + c), p.word);
    else if constexpr (kAccess == Access::Shifted) elementwise();
  } else {
    elementwise();
  }
}

// Which columns a thread holds: chunk i starts at begin + (i·threads + t)·V.
struct RowSlot {
  int begin;    // first column of this CTA's slice
  int t;        // thread within the row
  int threads;  // threads per row

  template <int kElements>
  __device__ int column(int i) const { return begin + (i * threads + t) * kElements; }
};

template <class T, class Config>
struct RowTile {
  static constexpr Residence kResidence = Residence::Registers;
  static constexpr int kElements = kChunkBytes / sizeof(T);  // per chunk
  static constexpr int kChunks = Config::kChunks;
  // Loops over the chunks unroll fully: a register array is indexed by constants only.
  static constexpr int kUnroll = kChunks;
  using Chunk = Pack<T, kElements>;
  Chunk chunk[kChunks];

  RowTile() = default;
  // The interface of SharedRowTile (device/row/shared_row_tile.cuh), which needs the slot.
  __device__ explicit RowTile(const RowSlot&) {}

  // First column of chunk i held by the thread at `slot`.
  __device__ static int column(const RowSlot& slot, int i) { return slot.column<kElements>(i); }

  template <Access kAccess>
  __device__ void load(const T* row, const RowSlot& slot, int n) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i)
      chunk[i] = load_pack<T, kElements, Cache::Stream, kAccess>(row, column(slot, i), n);
  }

  // The thread's chunks of a row staged in shared memory (`row`); chunks past n read as 0.
  template <Access kAccess>
  __device__ void load_staged(const T* row, const RowSlot& slot, int n) {
    static_assert(kAccess != Access::Scalar, "whole chunks");
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = column(slot, i);
      if (chunk_in_row<kAccess>(c, n)) {
        chunk[i].word = *reinterpret_cast<const typename Chunk::Word*>(row + c);
      } else {
#pragma unroll
        for (int e = 0; e < kElements; ++e) chunk[i].e[e] = Element<T>::store(0.0f);
      }
    }
  }

  __device__ Chunk get(int i) const { return chunk[i]; }
  __device__ void put(int i, const Chunk& c) { chunk[i] = c; }
  // NOTE: bf16 from its 32-bit word (one shift or mask; see unpack_floats).
  __device__ float value(int i, int e) const {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const std::uint32_t word = reinterpret_cast<const std::uint32_t*>(&chunk[i])[e / 2];
      return __uint_as_float(e % 2 == 0 ? word << 16 : word & 0xFFFF0000u);
    } else {
      return Element<T>::load(chunk[i].e[e]);
    }
  }
  __device__ void set(int i, int e, float v) { chunk[i].e[e] = Element<T>::store(v); }

  // f(value, column) for every held element of a column in [0, n).
  template <Access kAccess, class F>
  __device__ void for_each(const RowSlot& slot, int n, F&& f) const {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = column(slot, i);
      if (kAccess != Access::Scalar && !chunk_in_row<kAccess>(c, n)) continue;  // a vector chunk is all in or all out
      float v[kElements];
      unpack_floats<T, kElements>(chunk[i], v);
      // NOTE: a shifted row's inner chunks skip the test per element; only its first and last
      // chunk take it.
      if (kAccess == Access::Shifted && chunk_whole<kAccess, kElements>(c, n)) {
#pragma unroll
        for (int e = 0; e < kElements; ++e) f(v[e], c + e);
      } else {
#pragma unroll
        for (int e = 0; e < kElements; ++e)
          if (element_in_row<kAccess>(c, e, n)) f(v[e], c + e);
      }
    }
  }

  // Stores out[c + e] = f(i, e, c + e) for every held column in [0, n), as Out elements, chunk by
  // chunk.
  template <class Out, Access kAccess, class F>
  __device__ void store_mapped(Out* row, const RowSlot& slot, int n, F&& f) const {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = column(slot, i);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      float v[kElements];
#pragma unroll
      for (int e = 0; e < kElements; ++e) v[e] = f(i, e, c + e);
      store_pack<Out, kElements, kAccess>(row, c, n, pack_floats<Out, kElements>(v));
    }
  }
};

}  // namespace fusekit::device
