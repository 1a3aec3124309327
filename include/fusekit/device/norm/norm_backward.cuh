#pragma once
// Fused norm backward. Per row, one read of x and dy and one write of dx:
//   x̂ = (x − mean)·rstd,  g = dy·w
//   LayerNorm: dx = rstd·(g − mean(g) − x̂·mean(g·x̂));   RMSNorm: dx = rstd·(g − x̂·mean(g·x̂))
// and the parameter gradients dw = Σ_rows dy·x̂, db = Σ_rows dy in two deterministic steps:
//   1. norm_backward_kernel: CTA group k (a CTA, or a cluster for split rows) takes a fixed,
//      contiguous block of rows, sums dy·x̂ and dy over them in registers, and writes its
//      partial sums to row k of two f32 [groups, n] arrays (rows that share a CTA are summed
//      through shared memory first, in a fixed order);
//   2. norm_column_sum_kernel (many groups), norm_column_sum_tile_kernel (a few dozen) or
//      norm_column_sum_by_column_kernel (a few, the cluster kernels' long rows): each column's
//      partials are summed over the groups in a fixed order (column_sum_plan.hpp picks one).
// No atomics: the same device and shape give the same bits every run.

#include <cstdint>

#include "fusekit/device/norm/column_sum_plan.hpp"
#include "fusekit/device/row/cluster_exchange.cuh"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/device/row/row_tile.cuh"
#include "fusekit/device/row/shared_row_tile.cuh"
#include "fusekit/norm.hpp"

namespace fusekit::device {

struct NormBackwardParams {
  RowAddress x, dy, dx;
  const void* weight = nullptr;  // nullptr: w = 1
  const float* mean = nullptr;   // per row (LayerNorm)
  const float* rstd = nullptr;   // per row
  float* partial_dw = nullptr;   // [groups, n]; nullptr: dw not wanted
  float* partial_db = nullptr;   // [groups, n]; nullptr: db not wanted
  std::int64_t rows = 0, rows_per_batch = 1;
  std::int64_t steps = 0;            // row steps: rows_per_cta rows each, ceil(rows / rows_per_cta)
  std::int64_t steps_per_group = 0;  // consecutive steps of one CTA group
  int n = 0;
  RowLayout layout;
  NormKind kind = NormKind::RmsNorm;
};

// The row all-reduce of a loop over rows: consecutive iterations use two shared-memory (and
// cluster) scratch slots, so one iteration's writes never race the previous one's reads:
// between them every thread of the cluster has passed the other slot's barrier.
template <class V, class Op>
__device__ inline V row_allreduce_in_loop(V v, Op op, const RowLayout& layout, std::int64_t iteration) {
  return iteration % 2 == 0 ? row_allreduce<0>(v, op, layout) : row_allreduce<1>(v, op, layout);
}

// Per-column sums held by one thread over the rows of its block (its columns of the slice).
template <class T, class Config>
struct ColumnSums {
  static constexpr int kElements = RowTile<T, Config>::kElements;
  static constexpr int kChunks = Config::kChunks;
  float dw[kChunks][kElements] = {};
  float db[kChunks][kElements] = {};
};

// Writes one f32 value per held column < n of a thread's sums to `out` (a row of n floats).
template <class T, class Config, Access kAccess>
__device__ inline void store_column_sums(float* out, const float (&sums)[Config::kChunks][RowTile<T, Config>::kElements],
                                         const RowSlot& slot, int n) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  constexpr int kFloatsPerChunk = kChunkBytes / sizeof(float);
#pragma unroll
  for (int i = 0; i < Tile::kChunks; ++i) {
    const int c = Tile::column(slot, i);
    if (c >= n) continue;
    if constexpr (kAccess != Access::Scalar) {
      // NOTE: n is a whole number of chunks of T here, so rows of f32 partials stay 16-byte aligned.
#pragma unroll
      for (int q = 0; q < kE / kFloatsPerChunk; ++q) {
        Pack<float, kFloatsPerChunk> v;
#pragma unroll
        for (int e = 0; e < kFloatsPerChunk; ++e) v.e[e] = sums[i][q * kFloatsPerChunk + e];
        store_pack<float, kFloatsPerChunk, kAccess>(out, c + q * kFloatsPerChunk, n, v);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kE; ++e)
        if (c + e < n) out[c + e] = sums[i][e];
    }
  }
}

// One row's inputs in registers: its slice of x and dy and the forward's statistics.
template <class T, class Config, Access kAccess>
struct NormBackwardRow {
  RowTile<T, Config> x, dy;
  float mean, rstd;
  // NOTE: the row index alone (32 bits: the launcher checks rows < 2^32); its address row and
  // column count are recomputed where used, to spare registers.
  std::uint32_t index;

  __device__ bool live(const NormBackwardParams& p) const { return index < p.rows; }
  __device__ std::int64_t row(const NormBackwardParams& p) const { return live(p) ? index : 0; }
  // NOTE: a row past the end (the last group of packed short rows) holds no columns (x and dy
  // read as 0, so it adds nothing to any sum) but still takes part in its CTA's barriers.
  __device__ int n(const NormBackwardParams& p) const { return live(p) ? p.n : 0; }

  __device__ void load(const NormBackwardParams& p, const RowSlot& slot, std::int64_t at) {
    index = static_cast<std::uint32_t>(at < p.rows ? at : p.rows);
    x.template load<kAccess>(p.x.row_divided<const T>(row(p), p.rows_per_batch), slot, n(p));
    dy.template load<kAccess>(p.dy.row_divided<const T>(row(p), p.rows_per_batch), slot, n(p));
    mean = p.kind == NormKind::LayerNorm ? p.mean[row(p)] : 0.0f;
    rstd = p.rstd[row(p)];
  }
};

// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) of one row, as two FMAs per element on g and x̂:
// rstd·g + (−rstd·mean(g)), then + x̂·(−rstd·mean(g·x̂)).
struct DxTerms {
  float rstd, shift, slope;
  __device__ static DxTerms of(float rstd, float mean_g, float mean_g_xhat) {
    return {rstd, -rstd * mean_g, -rstd * mean_g_xhat};
  }
  __device__ float dx(float g, float xhat) const { return fmaf(xhat, slope, fmaf(g, rstd, shift)); }
};

// One row of the block: dx written, and dy·x̂ and dy added to the thread's column sums.
// `iteration` counts the rows of the block (it picks the reduction's scratch slot).
template <class T, class Config, Access kAccess>
__device__ inline void norm_backward_row(const NormBackwardParams& p, const RowSlot& slot,
                                         const RowTile<T, Config>& w, const NormBackwardRow<T, Config, kAccess>& r,
                                         ColumnSums<T, Config>& sums, std::int64_t iteration) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  const float inv_n = 1.0f / static_cast<float>(p.n);
  // Σ g and Σ g·x̂ over the row; columns past n have dy = 0, so g = 0 adds nothing.
  SumPair part{0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < Tile::kChunks; ++i)
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      const float g = r.dy.value(i, e) * w.value(i, e);
      part.first += g;
      part.second += g * (r.x.value(i, e) - r.mean);
    }
  part.second *= r.rstd;  // Σg·x̂ = rstd·Σg·(x − mean)
  const SumPair total = row_allreduce_in_loop(part, SumPairOp{}, p.layout, iteration);
  const DxTerms terms = DxTerms::of(r.rstd, p.kind == NormKind::LayerNorm ? total.first * inv_n : 0.0f, total.second * inv_n);

  r.x.template store_mapped<T, kAccess>(p.dx.row_divided<T>(r.row(p), p.rows_per_batch), slot, r.n(p), [&](int i, int e, int) {
    const float xhat = (r.x.value(i, e) - r.mean) * r.rstd;
    return terms.dx(r.dy.value(i, e) * w.value(i, e), xhat);
  });
#pragma unroll
  for (int i = 0; i < Tile::kChunks; ++i)
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      sums.dw[i][e] += r.dy.value(i, e) * ((r.x.value(i, e) - r.mean) * r.rstd);
      sums.db[i][e] += r.dy.value(i, e);
    }
}

// w's chunks of a thread, read once for all rows of its block (columns >= n read as 0: their dy
// is 0 too).
template <class T, class Config, Access kAccess>
__device__ inline RowTile<T, Config> weight_tile(const NormBackwardParams& p, const RowSlot& slot) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  Tile w;
#pragma unroll
  for (int i = 0; i < Tile::kChunks; ++i) {
    const int c = Tile::column(slot, i);
    if (p.weight) {
      w.chunk[i] = load_pack<T, kE, Cache::Keep, kAccess>(static_cast<const T*>(p.weight), c, p.n);
    } else {
#pragma unroll
      for (int e = 0; e < kE; ++e) w.set(i, e, 1.0f);
    }
  }
  return w;
}

// A thread's column sums of its block, written to the group's row of the partials.
template <class T, class Config, Access kAccess>
__device__ inline void store_partials(const NormBackwardParams& p, const RowBlock& block, const RowSlot& slot,
                                      const ColumnSums<T, Config>& sums) {
  const std::int64_t offset = std::int64_t{block.group} * p.n;
  if (p.partial_dw) store_column_sums<T, Config, kAccess>(p.partial_dw + offset, sums.dw, slot, p.n);
  if (p.partial_db) store_column_sums<T, Config, kAccess>(p.partial_db + offset, sums.db, slot, p.n);
}

template <class T, class Config, Access kAccess>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) norm_backward_kernel(const NormBackwardParams p) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  cluster_begin(p.layout);
  const RowPosition at = RowPosition::of(p.layout);
  const RowBlock block = RowBlock::of(p.steps, p.steps_per_group, p.layout);
  const int within = static_cast<int>(at.row - std::int64_t{block.group} * p.layout.rows_per_cta);
  const int count = block.count;
  const auto index = [&](int k) { return block.step(k) * p.layout.rows_per_cta + within; };

  const Tile w = weight_tile<T, Config, kAccess>(p, at.slot);

  // NOTE: the next row's loads are issued before this row's reduction, so they stay in flight
  // through its barrier and its stores. At 128 registers only 512 threads per SM are resident
  // (80 registers spill), and rows two ahead (three rows held) spilled at 128.
  ColumnSums<T, Config> sums;
  NormBackwardRow<T, Config, kAccess> now;
  now.load(p, at.slot, index(0));
  for (int k = 0; k < count; ++k) {
    NormBackwardRow<T, Config, kAccess> next;
    if (k + 1 < count) next.load(p, at.slot, index(k + 1));
    norm_backward_row<T, Config, kAccess>(p, at.slot, w, now, sums, k);
    now = next;
  }

  // Rows that share a CTA: their sums meet in shared memory, added in row order by the first.
  if (p.layout.rows_per_cta > 1) {
    constexpr int kSlice = kMinBlockThreads * Config::kChunks * kE;  // a shared CTA holds 128 threads
    __shared__ float shared_dw[kSlice], shared_db[kSlice];
    const int slice = p.layout.slice;
    const bool leader_group = within == 0;
#pragma unroll
    for (int i = 0; i < Tile::kChunks; ++i)
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        const int c = Tile::column(at.slot, i) + e;
        if (!leader_group) {
          shared_dw[(within - 1) * slice + c] = sums.dw[i][e];
          shared_db[(within - 1) * slice + c] = sums.db[i][e];
        }
      }
    __syncthreads();
    if (leader_group)
      for (int r = 1; r < p.layout.rows_per_cta; ++r)
#pragma unroll
        for (int i = 0; i < Tile::kChunks; ++i)
#pragma unroll
          for (int e = 0; e < kE; ++e) {
            const int c = Tile::column(at.slot, i) + e;
            sums.dw[i][e] += shared_dw[(r - 1) * slice + c];
            sums.db[i][e] += shared_db[(r - 1) * slice + c];
          }
  }
  if (within == 0) store_partials<T, Config, kAccess>(p, block, at.slot, sums);
  cluster_finish(p.layout);
}

// The row loop with its rows staged in shared memory (vector access): each thread copies its
// chunks of x and dy kBackwardStages − 1 rows ahead by cp.async (its own chunks only, so no
// barrier guards the ring), instead of holding the next row in registers; the launcher takes it
// where that measured faster (src/norm/norm_backward.cu, staged_rows). Rows split over a cluster
// work too (their cluster reductions as in norm_backward_kernel).
inline constexpr int kBackwardStages = 4;
// Shared memory planes per stage: x and dy.
inline constexpr int kBackwardStagePlanes = 2;

template <class T, class Config>
__host__ __device__ constexpr std::size_t norm_backward_staged_bytes(const RowLayout& layout) {
  return SharedRowTile<T, Config>::bytes(layout) * kBackwardStages * kBackwardStagePlanes;
}

template <class T, class Config>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) norm_backward_staged_kernel(const NormBackwardParams p) {
  using Tile = RowTile<T, Config>;
  using Staged = SharedRowTile<T, Config>;
  constexpr Access kAccess = Access::Vector;
  cluster_begin(p.layout);
  const RowPosition at = RowPosition::of(p.layout);  // one row per CTA (rows_per_cta == 1)
  const RowBlock block = RowBlock::of(p.steps, p.steps_per_group, p.layout);
  const int count = block.count;
  const auto row_of = [&](int k) { return block.step(k); };
  const Tile w = weight_tile<T, Config, kAccess>(p, at.slot);

  // Starts the copies of row k's x and dy into its stage, as one cp.async group of the thread.
  const auto stage = [&](int k) {
    const std::int64_t row = row_of(k);
    const int plane = kBackwardStagePlanes * (k % kBackwardStages);
    Staged(at.slot, plane).template copy<kAccess>(p.x.row_divided<const T>(row, p.rows_per_batch), at.slot, p.n);
    Staged(at.slot, plane + 1).template copy<kAccess>(p.dy.row_divided<const T>(row, p.rows_per_batch), at.slot, p.n);
  };
  for (int k = 0; k + 1 < kBackwardStages; ++k) {
    if (k < count) stage(k);
    Staged::commit();
  }
  // The forward's statistics of the next row, loaded a row ahead.
  const auto mean_of = [&](int k) { return p.kind == NormKind::LayerNorm ? p.mean[row_of(k)] : 0.0f; };
  float mean = mean_of(0), rstd = p.rstd[row_of(0)];

  ColumnSums<T, Config> sums;
  for (int k = 0; k < count; ++k) {
    if (k + kBackwardStages - 1 < count) stage(k + kBackwardStages - 1);
    Staged::commit();
    Staged::template wait<kBackwardStages - 1>();  // row k landed; the later rows may still fly
    NormBackwardRow<T, Config, kAccess> r;
    r.index = static_cast<std::uint32_t>(row_of(k));
    r.mean = mean;
    r.rstd = rstd;
    if (k + 1 < count) {
      mean = mean_of(k + 1);
      rstd = p.rstd[row_of(k + 1)];
    }
    const int plane = kBackwardStagePlanes * (k % kBackwardStages);
    const Staged x(at.slot, plane), dy(at.slot, plane + 1);
#pragma unroll
    for (int i = 0; i < Tile::kChunks; ++i) {
      // Chunks past n were not copied: they read as 0, as the register kernel loads them.
      const bool in_row = Tile::column(at.slot, i) < p.n;
      r.x.chunk[i] = in_row ? x.get(i) : typename Tile::Chunk{};
      r.dy.chunk[i] = in_row ? dy.get(i) : typename Tile::Chunk{};
    }
    norm_backward_row<T, Config, kAccess>(p, at.slot, w, r, sums, k);
  }

  store_partials<T, Config, kAccess>(p, block, at.slot, sums);
  cluster_finish(p.layout);
}

// Rows split over a cluster (vector access): staged in shared memory as in
// norm_backward_staged_kernel, but a row's two sums cross the cluster by pushes onto mbarriers
// (device/row/cluster_exchange.cuh), kExchangeRows rows per push: two by default (their
// (Σg, Σg·x̂) pairs fill one 16-byte push); the wide rows push one (their CTAs' 32 KB planes leave
// room for three rows and the weight only).
inline constexpr int kExchangeRowsDefault = 2;

// Four chunks per thread stage the weight too: held in registers, its 16 spilled the kernel.
template <class Config>
inline constexpr bool kClusterWeightStaged = Config::kChunks >= 4;
template <class T, class Config, int kExchangeRows = kExchangeRowsDefault>
__host__ __device__ constexpr std::size_t norm_backward_cluster_bytes(const RowLayout& layout) {
  return SharedRowTile<T, Config>::bytes(layout) *
         (kExchangeRows * kExchangeGroupsStaged * kBackwardStagePlanes + (kClusterWeightStaged<Config> ? 1 : 0));
}

template <class T, class Config, int kExchangeRows = kExchangeRowsDefault>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) norm_backward_cluster_kernel(const NormBackwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tile = RowTile<T, Config>;
  using Staged = SharedRowTile<T, Config>;
  using GroupSums = device::GroupSums<SumPair, kExchangeRows>;
  constexpr int kE = Tile::kElements;
  constexpr Access kAccess = Access::Vector;
  constexpr int kStagedRows = kExchangeRows * kExchangeGroupsStaged;
  __shared__ ClusterExchange<GroupSums, GroupSumsOp<SumPairOp>> exchange;

  const RowPosition at = RowPosition::of(p.layout);  // one row per CTA (rows_per_cta == 1)
  const int rank = exchange.start();

  const RowBlock block = RowBlock::of(p.steps, p.steps_per_group, p.layout);
  const int count = block.count;
  const int exchanges = (count + kExchangeRows - 1) / kExchangeRows;  // the same in every CTA of the cluster
  const auto row_of = [&](int k) { return block.step(k); };
  constexpr bool kWeightStaged = kClusterWeightStaged<Config>;
  constexpr int kWeightPlane = kStagedRows * kBackwardStagePlanes;
  Tile w;
  if constexpr (kWeightStaged) {
    Staged staged_w(at.slot, kWeightPlane);
    if (p.weight) {
      staged_w.template copy<kAccess>(static_cast<const T*>(p.weight), at.slot, p.n);
    } else {
      typename Tile::Chunk ones;
#pragma unroll
      for (int e = 0; e < kE; ++e) ones.e[e] = Element<T>::store(1.0f);
#pragma unroll
      for (int i = 0; i < Tile::kChunks; ++i) staged_w.put(i, ones);
    }
  } else {
    w = weight_tile<T, Config, kAccess>(p, at.slot);
  }
  // w of chunk i as floats.
  const auto weights = [&](int i, float (&wv)[kE]) {
    if constexpr (kWeightStaged) {
      unpack_floats<T, kE>(Staged(at.slot, kWeightPlane).get(i), wv);
    } else {
#pragma unroll
      for (int e = 0; e < kE; ++e) wv[e] = w.value(i, e);
    }
  };
  const float inv_n = 1.0f / static_cast<float>(p.n);

  // Group g's rows (those in the block) start copying into their stage, one cp.async group.
  const auto stage = [&](int g) {
#pragma unroll
    for (int j = 0; j < kExchangeRows; ++j) {
      const int k = g * kExchangeRows + j;
      if (k >= count) continue;
      const std::int64_t row = row_of(k);
      const int plane = kBackwardStagePlanes * (k % kStagedRows);
      Staged(at.slot, plane).template copy<kAccess>(p.x.row<const T>(row, p.rows_per_batch), at.slot, p.n);
      Staged(at.slot, plane + 1).template copy<kAccess>(p.dy.row<const T>(row, p.rows_per_batch), at.slot, p.n);
    }
    Staged::commit();
  };
  // The forward's statistics of group g (rows past the block: 0, so they add nothing).
  struct Stats {
    float mean[kExchangeRows], rstd[kExchangeRows];
  };
  const auto stats_of = [&](int g) {
    Stats s;
#pragma unroll
    for (int j = 0; j < kExchangeRows; ++j) {
      const int k = g * kExchangeRows + j;
      s.mean[j] = k < count && p.kind == NormKind::LayerNorm ? p.mean[row_of(k)] : 0.0f;
      s.rstd[j] = k < count ? p.rstd[row_of(k)] : 0.0f;
    }
    return s;
  };
  // This thread's Σg and Σg·x̂ over its chunks of each row of group g.
  const auto sums_of = [&](int g, const Stats& s) {
    GroupSums part;
#pragma unroll
    for (int j = 0; j < kExchangeRows; ++j) {
      part.row[j] = {0.0f, 0.0f};
      const int k = g * kExchangeRows + j;
      if (k >= count) continue;
      const int plane = kBackwardStagePlanes * (k % kStagedRows);
      const Staged x(at.slot, plane), dy(at.slot, plane + 1);
#pragma unroll
      for (int i = 0; i < Tile::kChunks; ++i) {
        if (Tile::column(at.slot, i) >= p.n) continue;
        float xv[kE], dyv[kE], wv[kE];
        unpack_floats<T, kE>(x.get(i), xv);
        unpack_floats<T, kE>(dy.get(i), dyv);
        weights(i, wv);
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          const float g_e = dyv[e] * wv[e];
          part.row[j].first += g_e;
          part.row[j].second += g_e * (xv[e] - s.mean[j]);
        }
      }
      part.row[j].second *= s.rstd[j];  // Σg·x̂ = rstd·Σg·(x − mean): one multiply per row, not per element
    }
    return part;
  };
  ColumnSums<T, Config> sums;
  if (exchanges > 0) {
    stage(0);
    stage(1);
    Staged::template wait<1>();  // group 0 landed
    Stats now = stats_of(0), next = stats_of(1);
    exchange.push(0, sums_of(0, now), p.layout, rank);
    for (int g = 0; g < exchanges; ++g) {
      stage(g + 2);
      Staged::template wait<1>();  // group g + 1 landed; group g + 2 may still fly
      const Stats after = stats_of(g + 2);
      if (g + 1 < exchanges) exchange.push(g + 1, sums_of(g + 1, next), p.layout, rank);
      const GroupSums total = exchange.totals(g, p.layout.cluster);
      // dx of group g's rows, and dy·x̂ and dy into the column sums.
#pragma unroll
      for (int j = 0; j < kExchangeRows; ++j) {
        const int k = g * kExchangeRows + j;
        if (k >= count) continue;
        const float mean_g = p.kind == NormKind::LayerNorm ? total.row[j].first * inv_n : 0.0f;
        const float mean_g_xhat = total.row[j].second * inv_n;
        const DxTerms terms = DxTerms::of(now.rstd[j], mean_g, mean_g_xhat);
        const int plane = kBackwardStagePlanes * (k % kStagedRows);
        const Staged x(at.slot, plane), dy(at.slot, plane + 1);
        T* dx = p.dx.row<T>(row_of(k), p.rows_per_batch);
#pragma unroll
        for (int i = 0; i < Tile::kChunks; ++i) {
          const int c = Tile::column(at.slot, i);
          if (c >= p.n) continue;
          float xv[kE], dyv[kE], wv[kE], out[kE];
          unpack_floats<T, kE>(x.get(i), xv);
          unpack_floats<T, kE>(dy.get(i), dyv);
          weights(i, wv);
#pragma unroll
          for (int e = 0; e < kE; ++e) {
            const float xhat = (xv[e] - now.mean[j]) * now.rstd[j];
            out[e] = terms.dx(dyv[e] * wv[e], xhat);
            sums.dw[i][e] += dyv[e] * xhat;
            sums.db[i][e] += dyv[e];
          }
          store_pack<T, kE, kAccess>(dx, c, p.n, pack_floats<T, kE>(out));
        }
      }
      now = next;
      next = after;
    }
  }

  // NOTE: no cluster barrier at the exit (ClusterExchange).
  store_partials<T, Config, kAccess>(p, block, at.slot, sums);
#else
  __trap();  // rows split over clusters exist from sm_90 only (rows::max_cluster_ctas)
#endif
}

// Step 2, out[c] = Σ_k partial[k][c] in a fixed order for dw and db, where the groups are many
// (ColumnSumKernel::ManyGroups), in one pass: warp y of kColumnSumWarps sums groups y, y + 32, … of
// its lane's column, several loads of each in flight; the warps' sums are then added in warp
// order, warp 0 for dw and warp 1 for db. The order of every addition is fixed by the shape.
// NOTE: 32 warps a 32-column tile: at 8, the 128 CTAs of a 4096-long row read their partials (a
// few MB) with too few loads in flight.
// NOTE: measured on the H200 (session 53, ncu, bf16 LayerNorm backward) against a pass per
// parameter with one load in flight a warp: 7.3 → 6.1 µs at 4096 columns, 23.2 → 21.1 µs at 32768
// (66 groups, 1024 CTAs: there the CTAs, not the loads, are the cost); the whole backward +0.1–0.7 %.
template <class T>
__global__ void __launch_bounds__(kColumnSumWarps* kWarpThreads) norm_column_sum_kernel(const NormColumnSumParams p) {
  __shared__ float warp_sums_dw[kColumnSumWarps][kWarpThreads];
  __shared__ float warp_sums_db[kColumnSumWarps][kWarpThreads];
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int c = static_cast<int>(blockIdx.x) * kWarpThreads + lane;
  float dw = 0.0f, db = 0.0f;
  // NOTE: the loads go into arrays before the adds: an unrolled `s += partial[…]` loop came out of
  // ptxas with one load in flight (SASS).
  constexpr std::int64_t kRound = static_cast<std::int64_t>(kColumnSumWarps) * kColumnSumLoadsInFlight;
  for (std::int64_t k0 = warp; c < p.n && k0 < p.groups; k0 += kRound) {
    float dw_in[kColumnSumLoadsInFlight], db_in[kColumnSumLoadsInFlight];
#pragma unroll
    for (int i = 0; i < kColumnSumLoadsInFlight; ++i) {
      const std::int64_t k = k0 + static_cast<std::int64_t>(i) * kColumnSumWarps;
      const bool in = k < p.groups;
      dw_in[i] = in && p.partial_dw ? p.partial_dw[k * p.n + c] : 0.0f;
      db_in[i] = in && p.partial_db ? p.partial_db[k * p.n + c] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kColumnSumLoadsInFlight; ++i) {
      dw += dw_in[i];
      db += db_in[i];
    }
  }
  warp_sums_dw[warp][lane] = dw;
  warp_sums_db[warp][lane] = db;
  __syncthreads();
  if (warp > 1 || c >= p.n || (warp == 0 ? p.partial_dw : p.partial_db) == nullptr) return;
  float (*warp_sums)[kWarpThreads] = warp == 0 ? warp_sums_dw : warp_sums_db;
  float total = warp_sums[0][lane];
  for (int y = 1; y < kColumnSumWarps; ++y) total += warp_sums[y][lane];
  static_cast<T*>(warp == 0 ? p.dw : p.db)[c] = Element<T>::store(total);
}

// Step 2 where the groups are a few dozen (ColumnSumKernel::Tile): a CTA per 128 columns, lane l
// holding columns 4l … 4l + 3 as a float4; warp y sums groups y, y + 8, … with a round's loads of
// each partial in flight, then the CTA adds the warps' sums in warp order, threads 0–127 dw's and
// 128–255 db's. The order of every addition is fixed by the shape.
// NOTE: the cluster rows of 16384–32768 columns leave ~66 groups: there norm_column_sum_kernel
// took 1024 CTAs of 1024 threads at 32768 columns, its warps two loads each; this kernel takes
// 256 CTAs of 256 threads, every load of a warp in flight at once. Measured on an H100 (session
// 54, ncu, bf16, L2 flushed before each kernel, so the partials come from DRAM): LayerNorm's dw
// and db 21.4 → 9.1 µs at 32768 columns, 11.9 → 6.3 at 16384 (RMSNorm's dw 15.6 → 6.4, 9.0 →
// 5.2); the whole backward at 32768 columns +4.6 % (LayerNorm, 2615 → 2735 GB/s), +3.6 % (RMSNorm).
template <class T>
__global__ void __launch_bounds__(kColumnSumTileThreads) norm_column_sum_tile_kernel(const NormColumnSumParams p) {
  __shared__ float4 warp_sums[2][kColumnSumTileWarps][kWarpThreads];  // [dw, db][warp][lane]
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int vectors = p.n / kColumnSumTileVector;  // float4s a row
  const int v = static_cast<int>(blockIdx.x) * kWarpThreads + lane;
  const auto* partial_dw = reinterpret_cast<const float4*>(p.partial_dw);
  const auto* partial_db = reinterpret_cast<const float4*>(p.partial_db);
  const auto add = [](float4& s, const float4& x) { s.x += x.x, s.y += x.y, s.z += x.z, s.w += x.w; };
  float4 dw{}, db{};
  constexpr std::int64_t kRound = static_cast<std::int64_t>(kColumnSumTileWarps) * kColumnSumLoadsInFlight;
  for (std::int64_t k0 = warp; v < vectors && k0 < p.groups; k0 += kRound) {
    float4 dw_in[kColumnSumLoadsInFlight], db_in[kColumnSumLoadsInFlight];
#pragma unroll
    for (int i = 0; i < kColumnSumLoadsInFlight; ++i) {
      const std::int64_t k = k0 + static_cast<std::int64_t>(i) * kColumnSumTileWarps;
      const bool in = k < p.groups;
      dw_in[i] = in && partial_dw ? partial_dw[k * vectors + v] : float4{};
      db_in[i] = in && partial_db ? partial_db[k * vectors + v] : float4{};
    }
#pragma unroll
    for (int i = 0; i < kColumnSumLoadsInFlight; ++i) {
      add(dw, dw_in[i]);
      add(db, db_in[i]);
    }
  }
  warp_sums[0][warp][lane] = dw;
  warp_sums[1][warp][lane] = db;
  __syncthreads();
  const int parameter = static_cast<int>(threadIdx.x) / kColumnSumTileColumns;  // 0: dw, 1: db
  const int column = static_cast<int>(threadIdx.x) % kColumnSumTileColumns;
  const int c = static_cast<int>(blockIdx.x) * kColumnSumTileColumns + column;
  if (c >= p.n || (parameter == 0 ? p.partial_dw : p.partial_db) == nullptr) return;
  // A warp's sums as floats: the lanes' float4s in lane order are the tile's columns in order.
  const auto* sums = reinterpret_cast<const float(*)[kColumnSumTileColumns]>(warp_sums[parameter]);
  float total = sums[0][column];
  for (int y = 1; y < kColumnSumTileWarps; ++y) total += sums[y][column];
  static_cast<T*>(parameter == 0 ? p.dw : p.db)[c] = Element<T>::store(total);
}

// Step 2 where the groups are few (ColumnSumKernel::ByColumn): out[c] = Σ_k partial[k][c] by a
// thread per column, k in order, several loads in flight. (norm_column_sum_kernel's CTAs of 1024
// threads take 32 columns each: at 7 groups, rows of 262144, 8192 of them, 7 of whose 32 warps
// load anything.)
// NOTE: measured on an H100 (session 52, ncu, bf16 LayerNorm backward, dw and db): 132 → 8.7 µs
// at 262144 columns (7 groups), 41.5 → 11.1 µs at 65536 (33); the whole backward 2032 → 2726
// GB/s at 262144, 2355 → 2766 at 131072, 2550 → 2787 at 65536.
template <class T>
__global__ void __launch_bounds__(kColumnSumColumnThreads) norm_column_sum_by_column_kernel(const NormColumnSumParams p) {
  const int c = static_cast<int>(blockIdx.x) * kColumnSumColumnThreads + static_cast<int>(threadIdx.x);
  if (c >= p.n) return;
  float dw = 0.0f, db = 0.0f;
#pragma unroll kColumnSumLoadsInFlight
  for (std::int64_t k = 0; k < p.groups; ++k) {
    if (p.partial_dw) dw += p.partial_dw[k * p.n + c];
    if (p.partial_db) db += p.partial_db[k * p.n + c];
  }
  if (p.partial_dw) static_cast<T*>(p.dw)[c] = Element<T>::store(dw);
  if (p.partial_db) static_cast<T*>(p.db)[c] = Element<T>::store(db);
}

}  // namespace fusekit::device
