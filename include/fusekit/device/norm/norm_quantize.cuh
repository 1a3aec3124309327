#pragma once
// Fused norm + fp8 e4m3 quantize, the row in registers and y computed once:
//   q = saturate(y·s),  y = (h − mean)·rstd·w + b,  s = 448/amax(y row) (PerRow) or 1/scale (PerTensor)
//
// The row is unpacked to f32 once; its statistics are summed from those values and y replaces them
// in place, so a thread's row takes one copy of registers (norm_forward_row's quantizing forms keep
// the packed row and y beside it, or compute y twice).
// NOTE: measured on the H200 (session 21, LayerNorm → e4m3 bf16, 2^27 elements): 2.92–3.09 →
// 3.30–3.53 TB/s at 1024–4096 columns, 1.99 → 2.62 at 12288; f16 at 4096 2.56 → 3.36. ncu at
// 32768×4096: 724 → 626 instructions per warp and row of 1024 elements (the row's fixed costs:
// run-time dispatch of the kind, terms and residual, the residual's branches, the kept y).
#include <cstdint>

#include "fusekit/device/norm/norm_forward.cuh"

namespace fusekit::device {

// The register cap of norm_quantize_kernel: the row's 32 values per thread, each chunk's weight
// and bias, and the row's addresses, without spills (ptxas): 72 on sm_90a (seven 128-thread CTAs
// per SM), 80 on sm_80, whose software e4m3 conversion spilled 4 bytes at 72.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
inline constexpr int kQuantizeMaxRegisters = 80;
#else
inline constexpr int kQuantizeMaxRegisters = 72;
#endif

template <class T, class Config, Access kAccess>
__global__ void __maxnreg__(kQuantizeMaxRegisters) norm_quantize_kernel(const NormForwardParams p) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  constexpr int kChunks = Tile::kChunks;
  static_assert(kAccess != Access::Scalar, "whole chunks: a chunk is in its row or past it");
  cluster_begin(p.layout);
  const RowPosition at = RowPosition::of(p.layout);
  const bool live = at.row < p.rows;
  const int n = live ? p.n : 0;
  const std::int64_t row = at.address(p.rows);

  // Chunks past the row read as 0, so they add nothing to Σh and Σh².
  Tile h(at.slot);
  h.template load<kAccess>(p.x.row<const T>(row, p.rows_per_batch), at.slot, n);
  float v[kChunks][kE];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    unpack_floats<T, kE>(h.get(i), v[i]);
    // NOTE: opaque to the compiler, so the packed row dies here: else ptxas kept it and unpacked
    // it again for y (32 instructions per thread and row; LayerNorm → e4m3 +3 % at 1024–12288
    // bf16 columns without them, session 21).
#pragma unroll
    for (int e = 0; e < kE; ++e) asm volatile("" : "+f"(v[i][e]));
  }

  // The statistics: LayerNorm's moments (layer_norm_moments), RMSNorm Σh².
  const float inv_n = p.inv_n;
  float mean = 0.0f, variance = 0.0f;
  if (p.kind == NormKind::LayerNorm) {
    const auto centred = [&](float centre) {
      SumPair dev{0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        if (!chunk_in_row<kAccess>(Tile::column(at.slot, i), n)) continue;
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          dev.first += v[i][e] - centre;
          dev.second += (v[i][e] - centre) * (v[i][e] - centre);
        }
      }
      return dev;
    };
    const Moments moments = layer_norm_moments(
        centred(0.0f), centred,
        [&](auto slot, SumPair v) { return row_allreduce<decltype(slot)::value>(v, SumPairOp{}, p.layout); }, inv_n,
        p.layout);
    mean = moments.mean;
    variance = moments.variance;
  } else {
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i)
#pragma unroll
      for (int e = 0; e < kE; ++e) squares += v[i][e] * v[i][e];
    variance = row_allreduce<2>(squares, SumOp{}, p.layout) * inv_n;
  }
  const float rstd = rsqrtf(variance + p.eps);
  if (live && at.leader()) {
    if (p.mean) p.mean[row] = mean;
    if (p.rstd) p.rstd[row] = rstd;
  }

  // y in place, and max |y| over the thread's chunks in the row, as (h·rstd + shift)·w + b
  // (AffineForm::Folded) for every row: a LayerNorm row whose |mean·rstd| exceeds kFoldedShiftMax
  // is centred in place first (shift 0), so the loop is compiled once per combination of terms.
  float shift = -mean * rstd;
  if (fabsf(shift) > kFoldedShiftMax) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i)
#pragma unroll
      for (int e = 0; e < kE; ++e) v[i][e] -= mean;
    shift = 0.0f;
  }
  const auto* weight = static_cast<const T*>(p.weight);
  const auto* bias = static_cast<const T*>(p.bias);
  float amax = 0.0f;
  const auto affine = [&](auto terms) {
    using Terms = decltype(terms);
    float chain = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      int c = Tile::column(at.slot, i);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      // NOTE: each chunk's weight and bias loads wait on the previous chunk's y (an empty asm
      // dependency on the column), as the quantizing forms of norm_forward_row: with every
      // chunk's loads hoisted above the first use, the kernel spilled at 80 registers.
      if (i > 0) asm volatile("" : "+r"(c) : "f"(chain));
      Pack<T, kE> w, b;
      if constexpr (Terms::kWeight) w = load_pack<T, kE, Cache::Keep, kAccess>(weight, c, n);
      if constexpr (Terms::kBias) b = load_pack<T, kE, Cache::Keep, kAccess>(bias, c, n);
      affine_in_place<Terms, AffineForm::Folded>(v[i], w, b, shift, rstd);
      chain = v[i][kE - 1];
#pragma unroll
      for (int e = 0; e < kE; ++e) amax = fmaxf(amax, fabsf(v[i][e]));
    }
  };
  // NOTE: AffineForm::Folded reads no kCentred: the shift carries the mean.
  if (weight != nullptr) {
    if (bias != nullptr) affine(AffineTerms<true, true, true>{});
    else affine(AffineTerms<true, false, true>{});
  } else {
    if (bias != nullptr) affine(AffineTerms<false, true, true>{});
    else affine(AffineTerms<false, false, true>{});
  }

  if (p.quant == QuantScale::PerRow || p.amax != nullptr) amax = row_allreduce<3>(amax, AmaxOp{}, p.layout);
  const float inv_scale = quantize_factor(p, amax, live && at.leader(), row);

  auto* out = p.y.row<__nv_fp8_e4m3>(row, p.rows_per_batch);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = Tile::column(at.slot, i);
    if (!chunk_in_row<kAccess>(c, n)) continue;
#pragma unroll
    for (int e = 0; e < kE; ++e) v[i][e] *= inv_scale;
    store_pack<__nv_fp8_e4m3, kE, kAccess>(out, c, n, pack_floats<__nv_fp8_e4m3, kE>(v[i]));
  }
  cluster_finish(p.layout);
}

}  // namespace fusekit::device
