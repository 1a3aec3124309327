#pragma once
// Fused softmax backward, one read of y and dy and one write of dx:
//   dx = scale · y ⊙ (dy − Σ_j dy·y),  y = softmax(scale·x) from the forward
// Both rows stay in registers (two chunks of each per thread, device/row/row_config.hpp's
// TwoTensorRows), so the row costs one reduction and one synchronisation. A masked entry has
// y = 0 and so gets dx = 0; a fully masked row (y all 0) gets dx all 0.
#include <cstdint>

#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

struct SoftmaxBackwardParams {
  RowAddress y, dy, dx;
  std::int64_t rows = 0, rows_per_batch = 1;
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

  Tile y, dy;
  y.template load<kAccess>(p.y.row<const T>(row, p.rows_per_batch), at.slot, n);
  dy.template load<kAccess>(p.dy.row<const T>(row, p.rows_per_batch), at.slot, n);
  // Columns past n read as 0 and add nothing to the dot product.
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < Tile::kChunks; ++i)
#pragma unroll
    for (int e = 0; e < Tile::kElements; ++e) dot += y.value(i, e) * dy.value(i, e);
  dot = row_allreduce<0>(dot, SumOp{}, p.layout);

  y.template store_mapped<T, kAccess>(p.dx.row<T>(row, p.rows_per_batch), at.slot, n, [&](int i, int e, int) {
    return p.scale * y.value(i, e) * (dy.value(i, e) - dot);
  });
}

template <class T, class Config, Access kAccess>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) softmax_backward_kernel(const SoftmaxBackwardParams p) {
  cluster_begin(p.layout);
  softmax_backward_row<T, Config, kAccess>(p, RowPosition::of(p.layout));
  cluster_finish(p.layout);
}

}  // namespace fusekit::device
