#pragma once
// A row's slice staged in shared memory instead of registers, for long rows.
//
// The register tile (row_tile.cuh) caps a CTA at the 64 KB its registers hold, so a row of 16384
// or more 16-bit elements takes one or two large CTAs per SM whose load, reduction and store
// phases run one after another. Staged in shared memory (copied there by cp.async, L2 → shared
// without registers) a CTA's slice costs few registers, several CTAs of different rows share an
// SM, and one CTA's reduction and stores overlap another's loads. The row is still read from
// memory once; the second pass over it reads shared memory.
//
// Same interface as RowTile (vector access, or shifted: a shifted row's first and last chunk are
// copied element by element, the rest as whole 16-byte chunks): chunk i of the thread at slot t
// lies at chunk i·threads + t of the CTA's slice, which is the slice's own order, so a warp's
// shared accesses are consecutive 16-byte words (no bank conflicts).
#include <cstddef>
#include <cstdint>

#include "fusekit/device/row/row_config.hpp"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

template <class T, class Config>
struct SharedRowTile {
  static constexpr Residence kResidence = Residence::Shared;
  static constexpr int kElements = kChunkBytes / sizeof(T);  // per chunk
  static constexpr int kChunks = Config::kChunks;
  // NOTE: loops over the chunks unroll by this much: fully unrolled, the compiler hoists every
  // shared load of the pass ahead of its use and spills at the register cap of three CTAs per SM.
  static constexpr int kUnroll = 4;
  using Chunk = Pack<T, kElements>;
  Chunk* slice;  // this thread's row group's slice in the CTA's dynamic shared memory
  int t;
  int threads;

  // The tile in `plane` of the CTA's dynamic shared memory (planes of bytes(layout) each: the row,
  // then any per-column vectors a kernel stages beside it).
  // NOTE: the row groups of a CTA are consecutive threads (RowPosition), and each has a slice.
  __device__ explicit SharedRowTile(const RowSlot& slot, int plane = 0) : t(slot.t), threads(slot.threads) {
    // NOTE: 128-byte aligned, whatever the kernel's static shared bytes: with the backward cluster
    // kernels' 544–2080 (16-byte aligned rows) they ran 0.9–2.0 % slower at 16384–262144 columns
    // (H100, session 50).
    extern __shared__ __align__(128) uint4 shared_row[];
    const int group = static_cast<int>(threadIdx.x) / threads;
    slice = reinterpret_cast<Chunk*>(shared_row) + (plane * static_cast<int>(blockDim.x) + group * threads) * kChunks;
  }

  __device__ static int column(const RowSlot& slot, int i) { return slot.column<kElements>(i); }
  // The dynamic shared memory a CTA of `layout` needs.
  static constexpr std::size_t bytes(const RowLayout& layout) {
    return std::size_t{kChunkBytes} * kChunks * static_cast<std::size_t>(layout.block_threads());
  }

  // Starts copying the thread's chunks in the row from `row` into shared memory (part of the
  // cp.async group that commit() closes; a shifted row's partial chunks are stored directly, their
  // columns outside the row as 0). Each thread reads back only the chunks it copied, so no CTA
  // barrier is needed.
  template <Access kAccess>
  __device__ void copy(const T* row, const RowSlot& slot, int n) {
    static_assert(kAccess == Access::Vector || kAccess == Access::Shifted, "shared rows hold 16-byte chunks");
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = column(slot, i);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      if (kAccess == Access::Shifted && !chunk_whole<kAccess, kElements>(c, n)) {
        slice[i * threads + t] = load_pack<T, kElements, Cache::Stream, kAccess>(row, c, n);
        continue;
      }
      const auto to = static_cast<std::uint32_t>(__cvta_generic_to_shared(&slice[i * threads + t]));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(row + c) : "memory");
    }
  }
  // Closes the thread's current cp.async group (an empty one if nothing was copied).
  __device__ static void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
  // copy() as a group of its own.
  template <Access kAccess>
  __device__ void issue(const T* row, const RowSlot& slot, int n) {
    copy<kAccess>(row, slot, n);
    commit();
  }
  // Waits until at most kPending of the thread's cp.async groups (the latest ones) are in flight.
  template <int kPending>
  __device__ static void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
  }
  // Copies and waits (RowTile's interface).
  template <Access kAccess>
  __device__ void load(const T* row, const RowSlot& slot, int n) {
    issue<kAccess>(row, slot, n);
    wait<0>();
  }

  __device__ Chunk get(int i) const { return slice[i * threads + t]; }
  __device__ void put(int i, const Chunk& chunk) { slice[i * threads + t] = chunk; }

  // f(value, column) for every held element of a column in [0, n).
  template <Access kAccess, class F>
  __device__ void for_each(const RowSlot& slot, int n, F&& f) const {
#pragma unroll kUnroll
    for (int i = 0; i < kChunks; ++i) {
      const int c = column(slot, i);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      float v[kElements];
      unpack_floats<T, kElements>(get(i), v);
      if (chunk_whole<kAccess, kElements>(c, n)) {
#pragma unroll
        for (int e = 0; e < kElements; ++e) f(v[e], c + e);
      } else {
#pragma unroll
        for (int e = 0; e < kElements; ++e)
          if (element_in_row<kAccess>(c, e, n)) f(v[e], c + e);
      }
    }
  }
};

}  // namespace fusekit::device
