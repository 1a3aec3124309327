#pragma once
// A long row's slice that stays in memory: read once for the row's statistics and once more, from
// L2, for its output.
//
// Rows staged in shared memory (shared_row_tile.cuh) fill an SM with one to three rows, and rows
// split over a cluster wait on a cluster barrier per row: at 65536 16-bit columns LayerNorm ran at
// 2.6 TB/s staged. Read twice, a row needs neither: the first read keeps its lines in L2
// (evict_last), the second reads them back and drops them (evict_first), so memory still sees x
// once, and a CTA of up to 1024 threads at 64 registers keeps each thread's loads in flight in
// batches. NOTE: the L2 hints are what make it work: without them, the second read missed often
// enough that LayerNorm ran at 2.6 TB/s at 65536 columns against 3.5 with them (session 13,
// experiment outside the project). The rows in flight (CTAs per SM × row bytes × SMs) must stay
// well inside L2: 256-thread CTAs at 65536 16-bit columns (three per SM, 50 MB) lost 20 %.
//
// Same interface as RowTile (vector access only), plus store_kept() and rebase(): add+norm stores
// h = x + residual as residual_out, kept in L2, and reads it back from there.
#include <cstdint>

#include "fusekit/device/row/row_config.hpp"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

// L2 eviction priorities of a row's two reads.
enum class L2Priority : std::uint8_t {
  Last,   // the statistics pass: the row is read again soon
  First,  // the output pass: the row's last read
};

// An L2 cache policy for loads of `kPriority`.
template <L2Priority kPriority>
__device__ __forceinline__ std::uint64_t l2_policy() {
  std::uint64_t policy;
  if constexpr (kPriority == L2Priority::Last)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  else asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// A 16-byte load that bypasses L1, under an L2 policy. NOTE: coherent (no .nc) and a compiler
// barrier ("memory"): add+norm reads back what the same thread stored earlier in the kernel.
__device__ __forceinline__ uint4 load_l2_hinted(const void* address, std::uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(address), "l"(policy)
               : "memory");
  return v;
}

// A 16-byte store under an L2 policy.
__device__ __forceinline__ void store_l2_hinted(void* address, const uint4& v, std::uint64_t policy) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n"
               :
               : "l"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
               : "memory");
}

// How a batch of for_chunk_batches treats its chunks past the row's end.
enum class BatchTail : std::uint8_t {
  Tested,   // each load under its own `if (c < n)`
  Clamped,  // loaded as the row's last chunk (load must read at the column it is given), not used
};

// use(i, c, load(i, c)) for each chunk i (first column c < n) of the thread at `slot`, kBatch
// chunks at a time: every load of a batch is issued before the first use, so kBatch loads per
// thread are in flight (the compiler does not move loads past the uses' stores).
// NOTE: from the SASS and measured on the H200 (session 14, 65536 bf16 columns): in the norms'
// output pass (x with the weight and bias), Tested let the compiler hoist the first chunk's
// arithmetic above the second chunk's loads, so a batch waited for two L2 latencies (LayerNorm
// 3.2 TB/s against 3.6 for the same schedule stand-alone); in the statistics pass (8 loads per
// batch), Clamped's address selects made ptxas, at 64 registers, issue the eighth load only after
// the first was used (RMSNorm 3.73 → 3.47 TB/s). The residual add's batches issue together either way.
template <class Tile, int kBatch, BatchTail kTail, class Load, class Use>
__device__ __forceinline__ void for_chunk_batches(const RowSlot& slot, int n, Load&& load, Use&& use) {
  static_assert(Tile::kChunks % kBatch == 0, "whole batches");
  using Data = decltype(load(0, 0));
  const int last = n - Tile::kElements;  // the row's last chunk
#pragma unroll 1
  for (int first = 0; first < Tile::kChunks && Tile::column(slot, first) < n; first += kBatch) {
    Data data[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c = Tile::column(slot, first + b);
      if constexpr (kTail == BatchTail::Clamped) data[b] = load(first + b, c < n ? c : last);
      else if (c < n) data[b] = load(first + b, c);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c = Tile::column(slot, first + b);
      if (c < n) use(first + b, c, data[b]);
    }
  }
}

template <class T, class Config>
struct RereadRowTile {
  static constexpr Residence kResidence = Residence::Reread;
  static constexpr int kElements = kChunkBytes / sizeof(T);  // per chunk
  static constexpr int kChunks = Config::kChunks;
  // Loads in flight per thread in the statistics pass (16 data registers; the output pass takes
  // fewer chunks per batch when it also loads the weight and bias).
  static constexpr int kBatch = 8;
  static constexpr int kUnroll = kBatch;  // RowTile's interface (the chunk loops here run in batches)
  using Chunk = Pack<T, kElements>;
  const T* row_ = nullptr;
  RowSlot slot_;
  std::uint64_t keep_, drop_;  // the policies of the first and the last read

  __device__ explicit RereadRowTile(const RowSlot& slot)
      : slot_(slot), keep_(l2_policy<L2Priority::Last>()), drop_(l2_policy<L2Priority::First>()) {}

  __device__ static int column(const RowSlot& slot, int i) { return slot.column<kElements>(i); }

  // Records where the row is; nothing is read yet.
  template <Access kAccess>
  __device__ void load(const T* row, const RowSlot&, int) {
    static_assert(kAccess == Access::Vector, "reread rows are whole 16-byte chunks");
    row_ = row;
  }
  // The row's values are now (also) at `row`, stored there by this thread: later reads go there.
  __device__ void rebase(const T* row) { row_ = row; }
  // Stores `chunk` at column c of `row`, kept in L2 for the reads after rebase(row).
  __device__ void store_kept(T* row, int c, const Chunk& chunk) const { store_l2_hinted(row + c, chunk.word, keep_); }

  // The chunk at column c, read for the last time.
  __device__ Chunk get_at(int c) const {
    Chunk chunk;
    chunk.word = load_l2_hinted(row_ + c, drop_);
    return chunk;
  }
  // The chunk at column c, read again later (kept in L2).
  __device__ Chunk get_kept_at(int c) const {
    Chunk chunk;
    chunk.word = load_l2_hinted(row_ + c, keep_);
    return chunk;
  }
  // Chunk i, read for the last time.
  __device__ Chunk get(int i) const { return get_at(column(slot_, i)); }

  // f(value, column) for every held element of a column < n: the first read, kept in L2.
  template <Access kAccess, class F>
  __device__ void for_each(const RowSlot& slot, int n, F&& f) const {
    for_chunk_batches<RereadRowTile, kBatch, BatchTail::Tested>(
        slot, n,
        [&](int, int c) {
          Chunk chunk;
          chunk.word = load_l2_hinted(row_ + c, keep_);
          return chunk;
        },
        [&](int, int c, const Chunk& chunk) {
          float v[kElements];
          unpack_floats<T, kElements>(chunk, v);
#pragma unroll
          for (int e = 0; e < kElements; ++e) f(v[e], c + e);
        });
  }
};

}  // namespace fusekit::device
