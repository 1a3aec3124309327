#pragma once
// Step 2 of the norm backward, the parameter gradients' column sums (norm_backward.cuh):
//   out[c] = Σ_k partial[k][c],  k = 0 … groups − 1
// over the f32 [groups, n] partials that step 1's CTA groups wrote, and which of three kernels
// takes a shape. Plain C++: the host launcher and the tests read the same rule.
#include <cstdint>

#include "fusekit/device/row/row_config.hpp"

namespace fusekit::device {

struct NormColumnSumParams {
  const float* partial_dw = nullptr;  // [groups, n]; nullptr: skipped
  const float* partial_db = nullptr;
  void* dw = nullptr;
  void* db = nullptr;
  std::int64_t groups = 0;
  int n = 0;
};

// The many-group kernel (norm_column_sum_kernel): 32 warps split the groups of a 32-column tile.
inline constexpr int kColumnSumWarps = 32;
inline constexpr int kColumnSumLoadsInFlight = 8;  // a thread's loads of each partial in flight

// The few-group kernel (norm_column_sum_by_column_kernel): a thread per column, the groups in turn.
inline constexpr std::int64_t kColumnSumSequentialGroups = 64;
inline constexpr int kColumnSumColumnThreads = 256;

// The tile kernel (norm_column_sum_tile_kernel): 8 warps split the groups of a 128-column tile,
// a float4 of columns per lane.
inline constexpr int kColumnSumTileWarps = 8;
inline constexpr int kColumnSumTileThreads = kColumnSumTileWarps * kWarpThreads;
inline constexpr int kColumnSumTileVector = 4;  // columns per lane: one 16-byte load
inline constexpr int kColumnSumTileColumns = kWarpThreads * kColumnSumTileVector;
// Up to two rounds of kColumnSumLoadsInFlight loads a warp; more groups take the many-group
// kernel, whose 32 warps a tile cover them in fewer rounds.
inline constexpr std::int64_t kColumnSumTileMaxGroups = 2 * kColumnSumTileWarps * kColumnSumLoadsInFlight;

enum class ColumnSumKernel { ByColumn, Tile, ManyGroups };

// Which kernel sums `p`: by column where the groups are few; by 128-column tiles where they are a
// few dozen (the cluster rows of 16384–32768 columns) and the partials are rows of whole, aligned
// float4s; else by 32-column tiles.
inline ColumnSumKernel column_sum_kernel(const NormColumnSumParams& p) {
  if (p.groups <= kColumnSumSequentialGroups) return ColumnSumKernel::ByColumn;
  const auto aligned = [](const float* partial) {
    return partial == nullptr || reinterpret_cast<std::uintptr_t>(partial) % (kColumnSumTileVector * sizeof(float)) == 0;
  };
  if (p.groups <= kColumnSumTileMaxGroups && p.n % kColumnSumTileVector == 0 && aligned(p.partial_dw) &&
      aligned(p.partial_db))
    return ColumnSumKernel::Tile;
  return ColumnSumKernel::ManyGroups;
}

}  // namespace fusekit::device
