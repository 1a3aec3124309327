#pragma once
// Online softmax over a warpgroup's wgmma accumulators, in registers, against a reference max
// m_ref that moves only when a tile's max exceeds it by more than kRescaleThreshold (in units of
// the exponent base 2):
//   m_tile = max_j s_j;  if (m_tile − m_ref)·c > kRescaleThreshold: α = 2^((m_ref − m_tile)·c),
//   m_ref = m_tile; else α = 1;   p_j = 2^(s_j·c − m_ref·c) ≤ 2^kRescaleThreshold,
//   ℓ_new = α·ℓ_old + Σ_j p_j,    with c = scale·log2(e) folded into one FFMA per score.
// O = Σ p·V / ℓ and LSE = (m_ref·c + log2 ℓ)·ln 2 are exact for any m_ref (it cancels), so the
// reference need not be the running max; it only bounds p. The 1/ℓ division and the LSE come
// once, at the end (sm90_epilogue.cuh).
#include <cute/tensor.hpp>
#include <cutlass/array.h>
#include <cutlass/numeric_conversion.h>

#include "fusekit/device/fast_math.cuh"

namespace fusekit::device::attention::sm90 {

using namespace cute;

inline constexpr float kMinusInf = -INFINITY;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

// A wgmma accumulator fragment ((2 columns, 2 rows, V n8 blocks), M, N) seen as (rows, columns):
// ((2 rows, M), (2 columns, V, N)). A thread's rows are 8 apart; the 4 threads of a quad hold the
// columns of the same rows (the PTX ISA's wgmma D-fragment layout).
template <class Layout>
__host__ __device__ constexpr auto accumulator_rows(Layout layout) {
  const auto v = get<0>(layout);
  return make_layout(make_layout(get<1>(v), get<1>(layout)), make_layout(get<0>(v), get<2>(v), get<2>(layout)));
}

template <class Tensor>
__host__ __device__ __forceinline__ auto rows_view(Tensor&& t) {
  return make_tensor(t.data(), accumulator_rows(t.layout()));
}

// Max and sum over the 4 threads of a quad, which together hold one row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullMask, x, 1);
  return x + __shfl_xor_sync(kFullMask, x, 2);
}

// A float accumulator fragment rounded to the 16-bit T of `dst`, two elements per conversion.
// NOTE: for P_j = S_j rounded to T, the accumulator order ((2 columns, 2 rows, n8 block), 1, 1)
// equals the A-operand order ((2 columns, 2 rows, k half), 1, k16 block), so the copy is element
// by element; elements 2i and 2i + 1 are neighbouring columns of one row in both.
template <class FragSrc, class FragDst>
__device__ __forceinline__ void round_fragment(const FragSrc& src, FragDst& dst) {
  static_assert(decltype(size(src))::value == decltype(size(dst))::value, "dst has src's elements");
  using T = typename FragDst::value_type;
  using Pair = cutlass::Array<T, 2>;
  cutlass::NumericArrayConverter<T, float, 2, cutlass::FloatRoundStyle::round_to_nearest> convert;
  auto pairs = recast<Pair>(dst);
#pragma unroll
  for (int i = 0; i < size(pairs); ++i) {
    cutlass::Array<float, 2> f;
    f[0] = src(2 * i);
    f[1] = src(2 * i + 1);
    pairs(i) = convert(f);
  }
}

// NOTE: with the reference moved on every new max (the classic online softmax), O ← α·O was 64
// FMULs per thread per key tile at D = 128, 13 % of the softmax's instructions (ncu, session 4);
// a stale reference skips them in every tile where no row of the warp moves it, which after the
// first few key tiles is nearly every tile. p ≤ 2^8 stays far inside bf16, f16 and the fp32 sum.
inline constexpr float kRescaleThreshold = 8.0f;

// Independent partial maxima per row: one chain over a thread's kBlockN/4 scores of a row is that
// many dependent FMNMX before the first exponential of the row can start.
inline constexpr int kMaxChains = 4;

template <int kRows>
struct OnlineSoftmax {
  // Reference max of the raw scores (before c) and this thread's part of the running sum (the
  // quad's sum is taken once, at the end).
  float row_max[kRows];
  float row_sum[kRows];

  __device__ OnlineSoftmax() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = kMinusInf;
      row_sum[r] = 0.0f;
    }
  }

  // Turns the scores `s` (rows view) into unnormalised probabilities in place and returns, per
  // row, the factor α that rescales what was accumulated before this tile (exactly 1 where the
  // reference stayed).
  template <class Scores>
  __device__ __forceinline__ void update(Scores& s, float scale_log2, float (&alpha)[kRows]) {
    static_assert(decltype(size<0>(s))::value == kRows, "one statistic per accumulator row");
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      static_assert(decltype(size<1>(s))::value % kMaxChains == 0, "whole chains per row");
      float chain_max[kMaxChains];
#pragma unroll
      for (int k = 0; k < kMaxChains; ++k) chain_max[k] = s(r, k);
#pragma unroll
      for (int c = kMaxChains; c < size<1>(s); ++c) chain_max[c % kMaxChains] = fmaxf(chain_max[c % kMaxChains], s(r, c));
      float tile_max = chain_max[0];
#pragma unroll
      for (int k = 1; k < kMaxChains; ++k) tile_max = fmaxf(tile_max, chain_max[k]);
      tile_max = quad_max(tile_max);
      // NOTE: the first visible key moves a reference of −∞ ((x + ∞)·c = +∞ exceeds the
      // threshold, α = 2^−∞ = 0); a tile without one leaves it (−∞ − m is −∞, and −∞ + ∞ is NaN,
      // which compares false), and a row whose reference is still −∞ subtracts 0, giving p = 0
      // instead of 2^(−∞ + ∞) = NaN.
      alpha[r] = 1.0f;
      if ((tile_max - row_max[r]) * scale_log2 > kRescaleThreshold) {
        alpha[r] = fast_exp2((row_max[r] - tile_max) * scale_log2);
        row_max[r] = tile_max;
      }
      const float max_scaled = row_max[r] == kMinusInf ? 0.0f : row_max[r] * scale_log2;
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < size<1>(s); ++c) {
        s(r, c) = fast_exp2(fmaf(s(r, c), scale_log2, -max_scaled));
        sum += s(r, c);
      }
      row_sum[r] = row_sum[r] * alpha[r] + sum;
    }
  }

  // O ← α·O, row by row (rows view of the O accumulators); skipped, warp-uniformly, when no row
  // of the warp moved its reference.
  template <class Output>
  __device__ __forceinline__ static void rescale(Output& o, const float (&alpha)[kRows]) {
    bool moved = false;
#pragma unroll
    for (int r = 0; r < kRows; ++r) moved |= alpha[r] != 1.0f;
    if (!__any_sync(kFullMask, moved)) return;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= alpha[r];
  }
};

}  // namespace fusekit::device::attention::sm90
