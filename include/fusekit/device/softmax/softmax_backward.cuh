#pragma once
// Fused softmax backward, one read of y and dy and one write of dx:
//   dx = scale · y ⊙ (dy − Σ_j dy·y),  y = softmax(scale·x) from the forward
// Rows one CTA holds stay in registers (two chunks of each per thread, device/row/row_config.hpp's
// TwoTensorRows), so the row costs one reduction and one synchronisation. Rows split over a
// cluster are staged in shared memory by persistent clusters whose dot products cross the
// cluster by pushes onto mbarriers (softmax_backward_cluster_kernel). A masked entry has y = 0 and
// so gets dx = 0; a fully masked row (y all 0) gets dx all 0.
#include <cstdint>
#include <utility>

#include "fusekit/device/row/cluster_exchange.cuh"
#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/device/row/row_tile.cuh"
#include "fusekit/device/row/shared_row_tile.cuh"

namespace fusekit::device {

struct SoftmaxBackwardParams {
  RowAddress y, dy, dx;
  std::int64_t rows = 0, rows_per_batch = 1;
  std::int64_t rows_per_group = 0;  // the cluster kernel's: consecutive rows of one cluster
  int n = 0;
  RowLayout layout;
  float scale = 1.0f;
};

template <class T, class Config, Access kAccess>
__device__ inline void softmax_backward_row(const SoftmaxBackwardParams& p, const RowPosition& at) {
  using Tile = RowTile<T, Config>;
  // NOTE: a row past the end (the last group of packed short rows) holds no columns (y and dy
  // read as 0) but still takes part in its CTA's barriers.
  const int n = at.row < p.rows ? p.n : 0;
  const std::int64_t row = at.address(p.rows);

  const T* y_row = p.y.row<const T>(row, p.rows_per_batch);
  // Shifted rows: the chunks start at the 16-byte boundary before the row (dy's and dx's rows have
  // y's phase).
  RowSlot slot = at.slot;
  if constexpr (kAccess == Access::Shifted) slot.begin -= row_phase(y_row);

  Tile y, dy;
  y.template load<kAccess>(y_row, slot, n);
  dy.template load<kAccess>(p.dy.row<const T>(row, p.rows_per_batch), slot, n);
  // Columns outside the row read as 0 and add nothing to the dot product.
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < Tile::kChunks; ++i)
#pragma unroll
    for (int e = 0; e < Tile::kElements; ++e) dot += y.value(i, e) * dy.value(i, e);
  dot = row_allreduce<0>(dot, SumOp{}, p.layout);

  y.template store_mapped<T, kAccess>(p.dx.row<T>(row, p.rows_per_batch), slot, n, [&](int i, int e, int) {
    return p.scale * y.value(i, e) * (dy.value(i, e) - dot);
  });
}

template <class T, class Config, Access kAccess>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) softmax_backward_kernel(const SoftmaxBackwardParams p) {
  cluster_begin(p.layout);
  softmax_backward_row<T, Config, kAccess>(p, RowPosition::of(p.layout));
  cluster_finish(p.layout);
}

// Rows split over a cluster (vector access), staged in shared memory by cp.async and looped over
// by as many clusters as stay resident, each a block of consecutive rows. kExchangeRows rows' dot
// products go per push (device/row/cluster_exchange.cuh): two for two-chunk CTAs; the wide rows'
// 32 KB planes leave room for three rows, so one.
// NOTE: measured on the H200 (session 20, bf16, GB/s): at 12288 / 16384 / 24576 / 32768 / 65536
// / 131072 columns a CTA per row with a cluster barrier (softmax_backward_kernel) ran 2971 / 3305 /
// 2963 / 3051 / 2875 / 2437, this kernel 3955 / 3954 / 3939 / 3920 / 3979 / 4018 (f32 65536: 2504
// → 4094).
inline constexpr int kSoftmaxBackwardPlanes = 2;  // shared memory planes per staged row: y and dy

template <class T, class Config, int kExchangeRows>
__host__ __device__ constexpr std::size_t softmax_backward_cluster_bytes(const RowLayout& layout) {
  return SharedRowTile<T, Config>::bytes(layout) * kExchangeRows * kExchangeGroupsStaged * kSoftmaxBackwardPlanes;
}

template <class T, class Config, int kExchangeRows>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) softmax_backward_cluster_kernel(const SoftmaxBackwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tile = RowTile<T, Config>;
  using Staged = SharedRowTile<T, Config>;
  using Dots = GroupSums<float, kExchangeRows>;
  constexpr int kE = Tile::kElements;
  constexpr Access kAccess = Access::Vector;
  constexpr int kStagedRows = kExchangeRows * kExchangeGroupsStaged;
  __shared__ ClusterExchange<Dots, GroupSumsOp<SumOp>> exchange;

  const RowPosition at = RowPosition::of(p.layout);  // one row per CTA (rows_per_cta == 1)
  const int rank = exchange.start();

  const RowBlock block = RowBlock::of(p.rows, p.rows_per_group, p.layout);
  const int count = block.count;
  const int exchanges = (count + kExchangeRows - 1) / kExchangeRows;  // the same in every CTA of the cluster
  const auto planes = [&](int k) {
    const int plane = kSoftmaxBackwardPlanes * (k % kStagedRows);
    return std::pair{Staged(at.slot, plane), Staged(at.slot, plane + 1)};
  };
  // Group g's rows (those in the block) start copying into their stage, one cp.async group.
  const auto stage = [&](int g) {
#pragma unroll
    for (int j = 0; j < kExchangeRows; ++j) {
      const int k = g * kExchangeRows + j;
      if (k >= count) continue;
      const std::int64_t row = block.step(k);
      auto [y, dy] = planes(k);
      y.template copy<kAccess>(p.y.row<const T>(row, p.rows_per_batch), at.slot, p.n);
      dy.template copy<kAccess>(p.dy.row<const T>(row, p.rows_per_batch), at.slot, p.n);
    }
    Staged::commit();
  };
  // This thread's Σ y·dy over its chunks of each row of group g.
  const auto dots_of = [&](int g) {
    Dots part;
#pragma unroll
    for (int j = 0; j < kExchangeRows; ++j) {
      part.row[j] = 0.0f;
      const int k = g * kExchangeRows + j;
      if (k >= count) continue;
      const auto [y, dy] = planes(k);
#pragma unroll
      for (int i = 0; i < Tile::kChunks; ++i) {
        if (Tile::column(at.slot, i) >= p.n) continue;
        float yv[kE], dyv[kE];
        unpack_floats<T, kE>(y.get(i), yv);
        unpack_floats<T, kE>(dy.get(i), dyv);
#pragma unroll
        for (int e = 0; e < kE; ++e) part.row[j] += yv[e] * dyv[e];
      }
    }
    return part;
  };

  if (exchanges > 0) {
    stage(0);
    stage(1);
    Staged::template wait<1>();  // group 0 landed
    exchange.push(0, dots_of(0), p.layout, rank);
    for (int g = 0; g < exchanges; ++g) {
      stage(g + 2);
      Staged::template wait<1>();  // group g + 1 landed; group g + 2 may still fly
      if (g + 1 < exchanges) exchange.push(g + 1, dots_of(g + 1), p.layout, rank);
      const Dots total = exchange.totals(g, p.layout.cluster);
#pragma unroll
      for (int j = 0; j < kExchangeRows; ++j) {
        const int k = g * kExchangeRows + j;
        if (k >= count) continue;
        const auto [y, dy] = planes(k);
        T* dx = p.dx.row<T>(block.step(k), p.rows_per_batch);
#pragma unroll
        for (int i = 0; i < Tile::kChunks; ++i) {
          const int c = Tile::column(at.slot, i);
          if (c >= p.n) continue;
          float yv[kE], dyv[kE], out[kE];
          unpack_floats<T, kE>(y.get(i), yv);
          unpack_floats<T, kE>(dy.get(i), dyv);
#pragma unroll
          for (int e = 0; e < kE; ++e) out[e] = p.scale * yv[e] * (dyv[e] - total.row[j]);
          store_pack<T, kE, kAccess>(dx, c, p.n, pack_floats<T, kE>(out));
        }
      }
    }
  }
  // NOTE: no cluster barrier at the exit (ClusterExchange).
#else
  __trap();  // rows split over clusters exist from sm_90 only (rows::max_cluster_ctas)
#endif
}

}  // namespace fusekit::device
