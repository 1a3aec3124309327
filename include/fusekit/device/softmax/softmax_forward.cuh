#pragma once
// Fused softmax forward, one read of x and one write of y:
//   y = exp(s − max s) / Σ exp(s − max s),  s = scale·x, −∞ where masked
// The row stays on chip: in registers (device/row/row_tile.cuh) or, for long rows, in shared
// memory (device/row/shared_row_tile.cuh). Each thread folds its values into an
// online (max, sum) pair, and the pairs meet in one reduction (device/row/row_reduce.cuh), so a
// row costs one synchronisation. Exponentials are exp2 of log2(e)-scaled logits (fast_exp2,
// device/fast_math.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "fusekit/device/fast_math.cuh"
#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/device/row/row_tile.cuh"
#include "fusekit/device/row/shared_row_tile.cuh"
#include "fusekit/device/row/tile_of.cuh"
#include "fusekit/reference/softmax.hpp"

namespace fusekit::device {

inline constexpr float kLog2e = 1.4426950408889634f;

struct SoftmaxForwardParams {
  RowAddress x, y;
  std::int64_t rows = 0, rows_per_batch = 1;
  int n = 0;
  RowLayout layout;
  float scale_log2 = kLog2e;  // scale·log2(e)
  reference::Causal causal = reference::Causal::No;
};

// Which logits a kernel must guard. Plain: a positive scale and no mask, so a −∞ input scales to
// −∞ by itself and every column is visible; General: any scale, causal mask.
// NOTE: the guards are about half of the instructions per element, and softmax is issue-bound
// (docs/performance.md), so the common case gets kernels without them.
enum class SoftmaxLogits : std::uint8_t { Plain, General };

// The log2-domain logit of x at column c: −∞ for a −∞ input (whatever the sign of the scale) and
// for columns at or past `visible_end`.
template <SoftmaxLogits kLogits>
__device__ inline float logit2(float x, int c, int visible_end, float scale_log2) {
  if constexpr (kLogits == SoftmaxLogits::Plain) return x * scale_log2;
  else return c >= visible_end || x == -INFINITY ? -INFINITY : x * scale_log2;
}

// logit2 − max without rounding the product first: for |x| in the tens of thousands, rounding
// x·scale·log2(e) to float before subtracting loses the low bits that decide the probability
// (a 0.3% error at |x| = 3e4); the fused multiply-add rounds only the difference.
template <SoftmaxLogits kLogits>
__device__ inline float shifted_logit2(float x, int c, int visible_end, float scale_log2, float max) {
  if constexpr (kLogits == SoftmaxLogits::Plain) return fmaf(x, scale_log2, -max);
  else return c >= visible_end || x == -INFINITY ? -INFINITY : fmaf(x, scale_log2, -max);
}

// Two 16-bit values of T compared at once in their own format, where T has such pairs.
template <class T>
using ValuePair = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162,
                                     std::conditional_t<std::is_same_v<T, __half>, __half2, void>>;

// The max of the thread's values of x, −∞ if it holds none. 16-bit rows of whole chunks compare
// their values in pairs in their own format (exact: the max of 16-bit values is one of them), a
// quarter of the instructions of unpacking each to a float first. Four running pairs, one per pair
// of a chunk, so the comparisons do not wait on each other.
// NOTE: measured on the H200 (session 17, bf16, 2^27 elements): softmax +3.6 % at 32768 columns
// (3.75 → 3.88 TB/s), +1.8 % at 65536, +1–3 % at 4096–16384 and 262144; ncu had the staged
// kernels issue-bound at locked clocks (0.80–0.84 warps issued per scheduler and cycle).
template <class T, Access kAccess, class Tile>
__device__ inline float max_of_values(const Tile& x, const RowSlot& slot, int n) {
  using Pair = ValuePair<T>;
  if constexpr (!std::is_void_v<Pair> && kAccess != Access::Scalar) {
    constexpr int kE = Tile::kElements;
    constexpr int kPairs = kE / 2;
    Pair max[kPairs];
#pragma unroll
    for (int k = 0; k < kPairs; ++k) max[k] = Pair(T(-INFINITY), T(-INFINITY));
    float edge_max = -INFINITY;  // Shifted: the values of a row's first and last chunk
#pragma unroll Tile::kUnroll
    for (int i = 0; i < Tile::kChunks; ++i) {
      const int c = Tile::column(slot, i);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      const auto chunk = x.get(i);
      if constexpr (kAccess == Access::Shifted) {
        // The columns outside the row were read as 0, so these chunks are compared element by
        // element.
        if (!chunk_whole<kAccess, kE>(c, n)) {
          float v[kE];
          unpack_floats<T, kE>(chunk, v);
#pragma unroll
          for (int e = 0; e < kE; ++e)
            if (element_in_row<kAccess>(c, e, n)) edge_max = fmaxf(edge_max, v[e]);
          continue;
        }
      }
      const auto* pairs = reinterpret_cast<const Pair*>(&chunk);
#pragma unroll
      for (int k = 0; k < kPairs; ++k) max[k] = __hmax2(max[k], pairs[k]);
    }
#pragma unroll
    for (int k = 1; k < kPairs; ++k) max[0] = __hmax2(max[0], max[k]);
    const float pair_max = fmaxf(__low2float(max[0]), __high2float(max[0]));
    if constexpr (kAccess == Access::Shifted) return fmaxf(pair_max, edge_max);
    else return pair_max;
  } else {
    float max = -INFINITY;
    x.template for_each<kAccess>(slot, n, [&](float v, int) { max = fmaxf(max, v); });
    return max;
  }
}

// One row (or this CTA's slice of it) per thread group.
template <class T, class Config, Access kAccess, Residence kResidence, SoftmaxLogits kLogits>
__device__ inline void softmax_forward_row(const SoftmaxForwardParams& p, const RowPosition& at) {
  using Tile = TileOf<kResidence, T, Config>;
  constexpr int kE = Tile::kElements;
  // NOTE: a row past the end (the last group of packed short rows) holds no columns but still
  // takes part in its CTA's barriers.
  const int n = at.row < p.rows ? p.n : 0;
  const std::int64_t row = at.address(p.rows);
  const T* x_row = p.x.row<const T>(row, p.rows_per_batch);
  // Shifted rows: the chunks start at the 16-byte boundary before the row (y's rows have x's phase).
  RowSlot slot = at.slot;
  if constexpr (kAccess == Access::Shifted) slot.begin -= row_phase(x_row);

  Tile x(slot);
  x.template load<kAccess>(x_row, slot, n);

  // Bottom-right causal alignment: row i of a batch sees columns j <= i + (n − rows_per_batch).
  int visible_end = p.n;
  if (p.causal == reference::Causal::Yes) {
    const auto i = static_cast<std::int64_t>(static_cast<std::uint32_t>(row) %
                                             static_cast<std::uint32_t>(p.rows_per_batch));
    const std::int64_t end = i + 1 + (p.n - p.rows_per_batch);
    visible_end = static_cast<int>(end < 0 ? 0 : (end > p.n ? p.n : end));
  }

  // The thread's (max, Σ exp2(logit − max)) over its values, its chunks tested as kPass says.
  const auto stats = [&](auto kPass) {
    constexpr Access kPassAccess = decltype(kPass)::value;
    MaxSum part{-INFINITY, 0.0f};
    if constexpr (kLogits == SoftmaxLogits::Plain) {
      // max(x·scale) = max(x)·scale for scale > 0, rounding included (it is monotonic).
      part.max = max_of_values<T, kPassAccess>(x, slot, n) * p.scale_log2;
    } else {
      x.template for_each<kPassAccess>(slot, n, [&](float v, int c) {
        part.max = fmaxf(part.max, logit2<kLogits>(v, c, visible_end, p.scale_log2));
      });
    }
    if (part.max != -INFINITY)
      x.template for_each<kPassAccess>(slot, n, [&](float v, int c) {
        part.sum += fast_exp2(shifted_logit2<kLogits>(v, c, visible_end, p.scale_log2, part.max));
      });
    return part;
  };
  T* y = p.y.row<T>(row, p.rows_per_batch);
  // y = exp2(logit − max) / sum for the thread's values, stored chunk by chunk.
  const auto output = [&](auto kPass, float max, float inv_sum) {
    constexpr Access kPassAccess = decltype(kPass)::value;
#pragma unroll Tile::kUnroll
    for (int i = 0; i < Tile::kChunks; ++i) {
      const int c = Tile::column(slot, i);
      if (!chunk_in_row<kPassAccess>(c, n)) continue;
      float v[kE];
      unpack_floats<T, kE>(x.get(i), v);
#pragma unroll
      for (int e = 0; e < kE; ++e)
        v[e] = fast_exp2(shifted_logit2<kLogits>(v[e], c + e, visible_end, p.scale_log2, max)) * inv_sum;
      store_pack<T, kE, kPassAccess>(y, c, n, pack_floats<T, kE>(v));
    }
  };
  // NOTE: a staged thread whose chunks all lie in the row (every thread of a row of whole slices)
  // runs the passes without a column test per chunk: softmax +4.4 % at 65536 columns (3.58 → 3.74
  // TB/s), +5 % at 262144, +1–2 % at 4096–32768 (session 17).
  using WholeChunks = std::integral_constant<Access, Access::Whole>;
  using OwnChunks = std::integral_constant<Access, kAccess>;
  bool whole = false;
  if constexpr (kResidence == Residence::Shared && kAccess == Access::Vector)
    whole = chunk_in_row<kAccess>(Tile::column(slot, Tile::kChunks - 1), n);

  const MaxSum part = whole ? stats(WholeChunks{}) : stats(OwnChunks{});
  const MaxSum total = row_allreduce<0>(part, MaxSumOp{}, p.layout);

  // NOTE: a fully masked row has no distribution; it is written as zeros.
  const bool empty = total.max == -INFINITY;
  const float inv_sum = empty ? 0.0f : 1.0f / total.sum;
  const float max = empty ? 0.0f : total.max;
  if (whole) output(WholeChunks{}, max, inv_sum);
  else output(OwnChunks{}, max, inv_sum);
}

template <class T, class Config, Access kAccess, Residence kResidence, SoftmaxLogits kLogits>
__global__ void __launch_bounds__(Config::kMaxThreads, Config::kMinCtas) softmax_forward_kernel(const SoftmaxForwardParams p) {
  cluster_begin(p.layout);
  softmax_forward_row<T, Config, kAccess, kResidence, kLogits>(p, RowPosition::of(p.layout));
  cluster_finish(p.layout);
}

}  // namespace fusekit::device
