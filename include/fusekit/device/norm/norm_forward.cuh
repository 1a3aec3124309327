#pragma once
// Fused norm forward, one read of x and one write of y:
//   y = (h − mean)·rstd·w + b,  h = x [+ residual],  rstd = 1/sqrt(mean((h − mean)²) + eps)
// (RMSNorm: mean = 0). With an fp8 output, q = saturate(y / scale), scale per tensor (given) or
// per row (amax(y)/448, written out).
//
// The row stays on chip from the load to the store, in registers (device/row/row_tile.cuh) or, for
// long rows, in shared memory (device/row/shared_row_tile.cuh) or L2 (read twice from memory's
// point of view once: device/row/reread_row_tile.cuh), so a second pass over the row (the output;
// the centred second reduction that keeps the variance accurate when |mean| ≫ spread) costs no
// memory traffic.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/device/row/row_tile.cuh"
#include "fusekit/device/row/shared_row_tile.cuh"
#include "fusekit/device/row/tile_of.cuh"
#include "fusekit/dtype.hpp"
#include "fusekit/norm.hpp"

namespace fusekit::device {

// How an fp8 output is scaled (y ≈ q·scale, the dequantization scale an fp8 GEMM takes).
enum class QuantScale : std::uint8_t {
  None,       // the output has x's dtype
  PerTensor,  // scale read from tensor_scale[0]
  PerRow,     // scale = amax(y row)/448 written to row_scale[row]
};

// The norms a kernel is compiled for. Any: the kind and the bias are run-time arguments, so every
// launch holds the registers of LayerNorm's paths. RmsNormUnbiased: RMSNorm without bias compiled
// in, for the quantizing kernel, whose max |y| then rides in the sum of squares' reduction (at 4096
// bf16 columns 70 registers against 78 for Any in session 7, before NormLaunchBounds capped both).
// (The other quantizing norms with rows in registers run norm_quantize_kernel,
// device/norm/norm_quantize.cuh.)
enum class NormForms : std::uint8_t { Any, RmsNormUnbiased };

// A norm forward kernel's launch bounds: its config's, except for the quantizing kernels, which
// are capped at 64 registers where they fit without spills (ptxas, sm_80 and sm_90a): two
// 512-thread CTAs per SM (at 4096 bf16 columns eight 128-thread CTAs against seven at 72).
// NOTE: these kernels are bound by latency as much as by issue: warps count (session 12, run 6:
// RMSNorm → e4m3 +3 %, LayerNorm → e4m3 +8 % at 32768×4096 bf16, +12 % RMSNorm → e4m3 at 8192).
template <class T, class Out, class Config, NormForms kForms>
struct NormLaunchBounds {
  static constexpr bool kQuantizing = !std::is_same_v<T, Out>;
  static constexpr int kQuantizingCtas = 2;
  static constexpr int kMaxThreads = Config::kMaxThreads;
  // Only where two of the config's largest CTAs fit an SM (not the reread rows' 1024 threads).
  static constexpr bool kCapped = kQuantizing && Config::kMaxThreads * kQuantizingCtas <= kMaxRowThreads;
  static constexpr int kMinCtas = kCapped ? std::max(Config::kMinCtas, kQuantizingCtas) : Config::kMinCtas;
};

inline constexpr float kFastDivisorMax = 0x1p126f;  // __fdividef's divisors
// A LayerNorm mean² up to this many times the variance costs at most 4 of the variance's 24 bits
// in Σh²/n − mean²; beyond, the row is reduced again around its mean.
inline constexpr float kTrustedShift = 16.0f;

struct NormForwardParams {
  RowAddress x, residual, residual_out, y;  // residual.data == nullptr: no residual add
  const void* weight = nullptr;             // nullptr: w = 1
  const void* bias = nullptr;               // nullptr: b = 0
  float* mean = nullptr;                    // per row; nullptr: not saved
  float* rstd = nullptr;
  std::int64_t rows = 0, rows_per_batch = 1;
  int n = 0;
  float inv_n = 0.0f;  // 1/n: divided on the host, not in every row (the quantizing norms +2 %)
  RowLayout layout;
  int row_buffers = 2;  // staged kernel: 2 (the next row lands during this one) or 1 (too long for 2)
  float eps = 0.0f;
  NormKind kind = NormKind::RmsNorm;
  QuantScale quant = QuantScale::None;
  const float* tensor_scale = nullptr;  // PerTensor
  float* row_scale = nullptr;           // PerRow
  float* amax = nullptr;                // optional: max |y| over the tensor (before scaling)
};

// Where a thread finds the weight and bias of its chunks. Rows in registers read them from
// global memory (L1 and L2 hold them: every row reads the same). Rows staged in shared memory
// (persistent CTAs) stage them once per CTA in shared memory, planes 0 and 1: there the rows fill
// most of the SM's shared memory and L1 with it; weights read through L1 ran RMSNorm at 3.2 TB/s
// against softmax's 3.7, and weights copied beside every row at 2.5 (32768 columns,
// docs/performance.md).
template <Residence kResidence, class T, class Config>
struct AffineSource {
  static constexpr int kE = kChunkBytes / sizeof(T);
  const T* weight;
  const T* bias;
  int n;
  static constexpr bool kFromL2 = true;

  __device__ AffineSource(const NormForwardParams& p, const RowSlot&, int n_live)
      : weight(static_cast<const T*>(p.weight)), bias(static_cast<const T*>(p.bias)), n(n_live) {}
  template <Access kAccess, bool kWeight, bool kBias>
  __device__ void chunk(int, int c, Pack<T, kE>& w, Pack<T, kE>& b) const {
    if constexpr (kWeight) w = load_pack<T, kE, Cache::Keep, kAccess>(weight, c, n);
    if constexpr (kBias) b = load_pack<T, kE, Cache::Keep, kAccess>(bias, c, n);
  }
};

template <class T, class Config>
struct AffineSource<Residence::Shared, T, Config> {
  static constexpr int kE = kChunkBytes / sizeof(T);
  using Tile = SharedRowTile<T, Config>;
  Tile weight, bias;
  bool has_weight, has_bias;
  static constexpr bool kFromL2 = false;

  // Starts the copies into planes 0 and 1 (only those used) as one cp.async group, empty without
  // weight and bias: the CTA's first row waits for it with its own.
  __device__ AffineSource(const NormForwardParams& p, const RowSlot& slot, int n_live)
      : weight(slot, 0), bias(slot, p.weight ? 1 : 0), has_weight(p.weight != nullptr), has_bias(p.bias != nullptr) {
    if (has_weight) weight.template copy<Access::Vector>(static_cast<const T*>(p.weight), slot, n_live);
    if (has_bias) bias.template copy<Access::Vector>(static_cast<const T*>(p.bias), slot, n_live);
    Tile::commit();
  }
  template <Access, bool kWeight, bool kBias>
  __device__ void chunk(int i, int, Pack<T, kE>& w, Pack<T, kE>& b) const {
    if constexpr (kWeight) w = weight.get(i);
    if constexpr (kBias) b = bias.get(i);
  }
};

// The planes of shared memory a staged norm CTA uses: the weight, the bias (each if given), then
// two row buffers (the row being normalised, the next one landing).
inline constexpr int kStagedRowBuffers = 2;
__host__ __device__ inline int affine_planes(const void* weight, const void* bias) {
  return (weight != nullptr ? 1 : 0) + (bias != nullptr ? 1 : 0);
}
__host__ __device__ inline int staged_planes(const void* weight, const void* bias, int row_buffers) {
  return affine_planes(weight, bias) + row_buffers;
}

// The affine terms of a launch (weight and bias given or not) and whether the row is centred
// (LayerNorm), fixed per launch: each output loop is compiled for one combination and chosen once
// per row. NOTE: with the tests per element, the output loop of RMSNorm at 4096 bf16 columns
// executed ~14 instructions per element (absent bias added as 0, the mean of 0 subtracted,
// defaults moved in), and the kernel was issue-bound at 27.5 instructions per element (ncu).
template <bool kWeight_, bool kBias_, bool kCentred_>
struct AffineTerms {
  static constexpr bool kWeight = kWeight_, kBias = kBias_, kCentred = kCentred_;
};

// The kind and the bias of a launch, as a kernel compiled for kForms sees them (constants where
// kForms fixes them, so the other paths are not compiled).
template <NormForms kForms>
__device__ __forceinline__ NormKind kind_of(const NormForwardParams& p) {
  if constexpr (kForms == NormForms::RmsNormUnbiased) return NormKind::RmsNorm;
  else return p.kind;
}
template <NormForms kForms>
__device__ __forceinline__ bool biased(const NormForwardParams& p) {
  if constexpr (kForms == NormForms::RmsNormUnbiased) return false;
  else return p.bias != nullptr;
}

// f(AffineTerms<…>{}) for the launch's combination.
template <NormForms kForms, class F>
__device__ __forceinline__ void with_affine_terms(const NormForwardParams& p, F&& f) {
  const bool centred = kind_of<kForms>(p) == NormKind::LayerNorm;
  const auto with_centring = [&](auto weight, auto bias) {
    if (centred) f(AffineTerms<decltype(weight)::value, decltype(bias)::value, true>{});
    else f(AffineTerms<decltype(weight)::value, decltype(bias)::value, false>{});
  };
  const auto with_bias = [&](auto weight) {
    if (biased<kForms>(p)) with_centring(weight, std::true_type{});
    else with_centring(weight, std::false_type{});
  };
  if (p.weight) with_bias(std::true_type{});
  else with_bias(std::false_type{});
}

// How a centred row's affine is computed.
//  Subtracted: (h − mean)·(rstd·w) + b, three instructions per element with both terms.
//  Folded: (h·rstd + shift)·w + b with shift = −mean·rstd, two. mean·rstd is rounded once, an
//    error of |mean·rstd|·2⁻²⁴ in every (h − mean)·rstd, so rows take it only while |mean·rstd| <=
//    kFoldedShiftMax (every row whose mean is within 16 standard deviations of 0; a constant row
//    of 10⁴ would get (h − mean)·rstd ≈ 0.2 instead of 0).
enum class AffineForm : std::uint8_t { Subtracted, Folded };
inline constexpr float kFoldedShiftMax = 16.0f;

// y of a chunk of the row, y = (h − mean)·rstd·w + b with the terms of `Terms` only, computed in
// place of h's values; `centre` is the mean (Subtracted) or the shift −mean·rstd (Folded).
// kE values of the chunk from y, the weight and bias as floats (wv, bv; read only where Terms has
// them).
template <class Terms, AffineForm kForm = AffineForm::Subtracted, int kE>
__device__ __forceinline__ void affine_floats_in_place(float* y, const float (&wv)[kE], const float (&bv)[kE],
                                                       float centre, float rstd) {
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    if constexpr (kForm == AffineForm::Folded) {
      const float t = fmaf(y[e], rstd, centre);
      if constexpr (Terms::kWeight && Terms::kBias) y[e] = fmaf(t, wv[e], bv[e]);
      else if constexpr (Terms::kWeight) y[e] = t * wv[e];
      else if constexpr (Terms::kBias) y[e] = t + bv[e];
      else y[e] = t;
    } else {
      const float centred = Terms::kCentred ? y[e] - centre : y[e];
      const float scale = Terms::kWeight ? rstd * wv[e] : rstd;
      if constexpr (Terms::kBias) y[e] = fmaf(centred, scale, bv[e]);
      else y[e] = centred * scale;
    }
  }
}
// The chunk's weight and bias packed in T.
template <class Terms, AffineForm kForm = AffineForm::Subtracted, class T, int kE>
__device__ __forceinline__ void affine_in_place(float (&y)[kE], const Pack<T, kE>& w, const Pack<T, kE>& b,
                                                float centre, float rstd) {
  float wv[kE], bv[kE];
  if constexpr (Terms::kWeight) unpack_floats<T, kE>(w, wv);
  if constexpr (Terms::kBias) unpack_floats<T, kE>(b, bv);
  affine_floats_in_place<Terms, kForm>(y, wv, bv, centre, rstd);
}
// affine_in_place from h's packed values.
template <class Terms, AffineForm kForm = AffineForm::Subtracted, class T, int kE>
__device__ __forceinline__ void affine_values(const Pack<T, kE>& h, const Pack<T, kE>& w, const Pack<T, kE>& b,
                                              float centre, float rstd, float (&y)[kE]) {
  unpack_floats<T, kE>(h, y);
  affine_in_place<Terms, kForm>(y, w, b, centre, rstd);
}

// affine_values with chunk i's weight and bias read from `affine`.
template <class Terms, Access kAccess, AffineForm kForm = AffineForm::Subtracted, class T, int kE, class Affine>
__device__ __forceinline__ void affine_chunk(const Pack<T, kE>& h, const Affine& affine, int i, int c, float centre,
                                             float rstd, float (&y)[kE]) {
  Pack<T, kE> w, b;
  affine.template chunk<kAccess, Terms::kWeight, Terms::kBias>(i, c, w, b);
  affine_values<Terms, kForm>(h, w, b, centre, rstd, y);
}

// A chunk of a reread row with its weight and bias, loaded together (for_chunk_batches).
template <class T, int kE>
struct AffineOperands {
  Pack<T, kE> h, w, b;
};
// Chunks per batch of a reread row's passes over y: 16 data registers per thread, whatever the
// affine terms load beside the row; half that for e4m3 outputs converted in software (sm_80:
// 16 bytes spilled at 64 registers).
template <class Terms, class Out>
inline constexpr int kRereadAffineBatch =
    RereadRowTile<float, RereadRows>::kBatch /
    (Terms::kWeight && Terms::kBias ? 4 : Terms::kWeight || Terms::kBias ? 2 : 1) /
    (std::is_same_v<Out, __nv_fp8_e4m3> && !kHardwareE4m3 ? 2 : 1);
// Chunks per batch of the passes over y of a row staged in shared memory whose weight and bias
// come from L2 (norm_forward_kernel), where chunk by chunk each waited on an L2 round trip.
// NOTE: measured on an H100 (session 41, bf16, 2^27 elements, GB/s): LayerNorm → e4m3 at 131072
// columns 713 chunk by chunk, 1800 in batches of four (72–80 registers: three CTAs per SM, as
// many as the staged rows' shared memory allows), 1555 in batches of eight (113–128 registers:
// two CTAs per SM); 262144 703 / 1690 / 1394. On the H200, chunk by chunk against four: 801 →
// 1904 at 131072, 768 → 1808 at 262144, f16 787 → 1800, f32 at 65536 1834 → 1980; plain
// LayerNorm at 131072 2871 → 3108, add+RMSNorm at 262144 2736 → 3237.
inline constexpr int kStagedAffineBatch = 4;
// A chunk of a reread row and of its residual, loaded together.
template <class T, int kE>
struct AddOperands {
  Pack<T, kE> x, residual;
};
// Chunks per batch of a reread row's residual add.
inline constexpr int kRereadAddBatch = RereadRowTile<float, RereadRows>::kBatch / 2;

// The factor a quantizing row's stores take, q = y·factor: 448/amax (PerRow; the row's scale,
// amax/448, written by its leader) or 1/scale (PerTensor). amax: the row's max |y| (all-reduced;
// unused for PerTensor).
// NOTE: the stores take 448/amax: one division instead of two (1/scale; measured neutral, session
// 12). An all-zero row gets scale 1 (any scale represents it; 0 would not invert); a row with a
// NaN gets a NaN amax (device/amax.cuh), so a NaN scale and NaN codes.
__device__ inline float quantize_scale(const NormForwardParams& p, float amax, bool leader, std::int64_t row) {
  if (p.quant == QuantScale::PerTensor) return 1.0f / *p.tensor_scale;
  if (leader) p.row_scale[row] = amax == 0.0f ? 1.0f : amax / kE4m3Max;
  // NOTE: an approximate quotient (within 2 ulp; the conversion saturates at 448 all the same):
  // the exact division's fix-ups cost every thread of every row ~10 instructions. __fdividef
  // returns 0 for divisors beyond 2^126, which take the exact one. With AmaxOp's redux: LayerNorm
  // → e4m3 +1.6 % at 32768×4096 bf16, +2.9 % at 12288, 2.1 % fewer instructions (session 22).
  return amax == 0.0f ? 1.0f : (amax < kFastDivisorMax ? __fdividef(kE4m3Max, amax) : kE4m3Max / amax);
}
// quantize_scale, with the row's amax folded into the tensor's where asked for, by the row's leader.
__device__ inline float quantize_factor(const NormForwardParams& p, float amax, bool leader, std::int64_t row) {
  if (leader && p.amax) filtered_atomic_amax(p.amax, amax);
  return quantize_scale(p, amax, leader, row);
}

// The all-reduce of call site kSlot for the row of loop iteration `parity` (0 or 1): a CTA that
// loops over rows alternates two scratch slots per call site, so one row's writes never race the
// previous row's reads (between them every thread has passed the other slot's barrier).
template <int kSlot, class V, class Op>
__device__ inline V norm_allreduce(V v, Op op, const RowLayout& layout, int parity) {
  constexpr int kSites = 4;
  return parity == 0 ? row_allreduce<kSlot>(v, op, layout) : row_allreduce<kSlot + kSites>(v, op, layout);
}

// A LayerNorm row's mean and variance mean((h − mean)²) from this thread's Σh and Σh² (`sums`):
// one all-reduce, mean = Σh/n and variance = Σh²/n − mean². The subtraction loses bits only when
// mean² ≫ variance, so a row far off zero takes a second all-reduce of Σ(h − mean) and
// Σ(h − mean)² (`centred(mean)`, this thread's), the mean's rounding error and the variance around
// the mean. `allreduce(slot, v)` reduces v over the row at call site slot (0, then 1).
// NOTE: rows that share a warp shuffle together and rows that share a CTA wait at one barrier
// (row_allreduce), so the warp (or CTA) takes the second all-reduce where any of its rows needs
// it, and each row keeps the result only where it does (its statistics never depend on its
// neighbours'). Taken by part of them, the shuffles and the barrier were undefined behaviour.
// Two reductions for every row (mean, then centred) ran at 3.08 TB/s at 32768×4096 bf16; centring
// the first one on the row's first element (a load every row waits on, and a subtraction per
// element) ran LayerNorm → e4m3 at 2.36 TB/s against 2.63 and long rows 3–4 % slower (session 12).
struct Moments {
  float mean, variance;
};
template <class Centred, class AllReduce>
__device__ __forceinline__ Moments layer_norm_moments(SumPair sums, Centred&& centred, AllReduce&& allreduce,
                                                      float inv_n, const RowLayout& layout) {
  sums = allreduce(std::integral_constant<int, 0>{}, sums);
  float mean = sums.first * inv_n;
  float variance = sums.second * inv_n - mean * mean;
  const bool far = mean * mean > kTrustedShift * variance;
  bool any_far = far;
  if (layout.threads < kWarpThreads) any_far = __any_sync(kFullWarpMask, far);
  else if (layout.rows_per_cta > 1 && layout.threads > kWarpThreads) any_far = __syncthreads_or(far);
  if (any_far) {
    const SumPair dev = allreduce(std::integral_constant<int, 1>{}, centred(mean));
    if (far) {
      const float shift = dev.first * inv_n;
      mean += shift;
      variance = dev.second * inv_n - shift * shift;
    }
  }
  return {mean, fmaxf(variance, 0.0f)};
}

// Whether a pass over a reread row is its last (the row may leave L2) or not.
enum class RowRead : std::uint8_t { Again, Last };

// One row (or this CTA's slice of it) of a thread group: h holds x, landed.
template <class T, class Out, class Config, Access kAccess, NormForms kForms, class Tile, class Affine>
__device__ inline void norm_forward_row(const NormForwardParams& p, const RowPosition& at, Tile& h,
                                        const Affine& affine, int parity) {
  constexpr int kE = Tile::kElements;
  const NormKind kind = kind_of<kForms>(p);
  // NOTE: a row past the end (the last group of packed short rows) holds no columns but still
  // takes part in its CTA's barriers.
  const bool live = at.row < p.rows;
  const int n = live ? p.n : 0;
  const std::int64_t row = at.address(p.rows);

  const T* residual = p.residual.data != nullptr ? p.residual.row<const T>(row, p.rows_per_batch) : nullptr;
  // NOTE: the updated residual is stored inside the add loop, overlapping the stores with the
  // loads still in flight (3.82 TB/s against 3.49 with the stores after the statistics, add+RMSNorm
  // 32768×4096 bf16); each thread stores only the chunks it has read, so in place is safe.
  T* residual_out = residual != nullptr ? p.residual_out.row<T>(row, p.rows_per_batch) : nullptr;
  constexpr bool kRereads = Tile::kResidence == Residence::Reread;
  constexpr bool kBatched = kRereads || (Tile::kResidence == Residence::Shared && Affine::kFromL2);
  constexpr std::integral_constant<RowRead, RowRead::Again> kReadAgain{};
  // Σh and Σh² of a reread row's residual add (the sums of the h it stores, rounded to T): the
  // statistics ride in the add pass, so the row is read back once (for the output), not twice.
  SumPair added_sums{0.0f, 0.0f};
  bool sums_added = false;
  if constexpr (kRereads) {
    if (residual != nullptr) {
      // h = x + residual is stored as residual_out, kept in L2, and read back from there.
      for_chunk_batches<Tile, kRereadAddBatch, BatchTail::Tested>(
          at.slot, n,
          [&](int, int c) {
            return AddOperands<T, kE>{h.get_at(c), load_pack<T, kE, Cache::Stream, kAccess>(residual, c, n)};
          },
          [&](int, int c, const AddOperands<T, kE>& d) {
            float hv[kE], rv[kE];
            unpack_floats<T, kE>(d.x, hv);
            unpack_floats<T, kE>(d.residual, rv);
#pragma unroll
            for (int e = 0; e < kE; ++e) hv[e] += rv[e];
            const auto sum = pack_floats<T, kE>(hv);
            h.store_kept(residual_out, c, sum);
            unpack_floats<T, kE>(sum, hv);
#pragma unroll
            for (int e = 0; e < kE; ++e) {
              added_sums.first += hv[e];
              added_sums.second += hv[e] * hv[e];
            }
          });
      h.rebase(residual_out);
      sums_added = true;
    }
  } else if (residual != nullptr) {
    // NOTE: the residual is added chunk by chunk, so a second tile never occupies registers.
#pragma unroll Tile::kUnroll
    for (int i = 0; i < Tile::kChunks; ++i) {
      const int c = Tile::column(at.slot, i);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      const auto r = load_pack<T, kE, Cache::Stream, kAccess>(residual, c, n);
      float hv[kE], rv[kE];
      unpack_floats<T, kE>(h.get(i), hv);
      unpack_floats<T, kE>(r, rv);
#pragma unroll
      for (int e = 0; e < kE; ++e) hv[e] += rv[e];
      const auto sum = pack_floats<T, kE>(hv);
      h.put(i, sum);
      store_pack<T, kE, kAccess>(residual_out, c, n, sum);
    }
  }

  // f(i, c, h, y) for each held chunk i of y = affine(h; centre, scale)·out_scale (columns c … c +
  // kE, c < n; h the chunk's packed values), the launch's affine terms compiled in. Without a bias
  // the output scale is folded into the row's: (h − centre)·(scale·out_scale)·w, one multiply per
  // element fewer. `read`: whether a reread row is read again after this pass (kept in L2) or not.
  const auto for_each_affine = [&](auto read, float centre, float scale, float out_scale, auto&& f) {
    with_affine_terms<kForms>(p, [&](auto terms) {
      using Terms = decltype(terms);
      const float row_scale = Terms::kBias ? scale : scale * out_scale;
      if constexpr (kBatched) {
        // A batch's row chunks, weights and biases are all loaded before its first store.
        constexpr int kBatch = kRereads ? kRereadAffineBatch<Terms, Out> : kStagedAffineBatch;
        for_chunk_batches<Tile, kBatch, BatchTail::Clamped>(
            at.slot, n,
            [&](int i, int c) {
              AffineOperands<T, kE> d;
              if constexpr (kRereads) d.h = decltype(read)::value == RowRead::Last ? h.get_at(c) : h.get_kept_at(c);
              else d.h = h.get(i);
              affine.template chunk<kAccess, Terms::kWeight, Terms::kBias>(i, c, d.w, d.b);
              return d;
            },
            [&](int i, int c, const AffineOperands<T, kE>& d) {
              float y[kE];
              affine_values<Terms>(d.h, d.w, d.b, centre, row_scale, y);
              if constexpr (Terms::kBias) {
#pragma unroll
                for (int e = 0; e < kE; ++e) y[e] *= out_scale;
              }
              f(i, c, d.h, y);
            });
      } else {
        // NOTE: no chunk's weight and bias loads here wait on the previous chunk's result: the
        // quantizing Any form's rows in registers, whose hoisted loads spilled, run
        // norm_quantize_row (device/norm/norm_quantize.cuh), which chains them; rows staged in
        // shared memory with their weight and bias (norm_forward_staged_kernel) hold no chunk in
        // registers, so their shared loads overlap (unchained: RMSNorm → e4m3 at 131072 bf16
        // columns 1321 → 2420 GB/s, H200, session 41).
        const auto chunks = [&](auto folded) {
          constexpr bool kFolded = decltype(folded)::value;
          const float shift = -centre * row_scale;
#pragma unroll Tile::kUnroll
          for (int i = 0; i < Tile::kChunks; ++i) {
            const int c = Tile::column(at.slot, i);
            if (!chunk_in_row<kAccess>(c, n)) continue;
            float y[kE];
            if constexpr (kFolded) affine_chunk<Terms, kAccess, AffineForm::Folded>(h.get(i), affine, i, c, shift, row_scale, y);
            else affine_chunk<Terms, kAccess>(h.get(i), affine, i, c, centre, row_scale, y);
            if constexpr (Terms::kBias) {
#pragma unroll
              for (int e = 0; e < kE; ++e) y[e] *= out_scale;
            }
            f(i, c, h.get(i), y);
          }
        };
        // NOTE: the branch is the same for every thread of the row (its statistics).
        if constexpr (Terms::kCentred) {
          if (fabsf(centre * scale) <= kFoldedShiftMax) chunks(std::true_type{});
          else chunks(std::false_type{});
        } else {
          chunks(std::false_type{});
        }
      }
    });
  };
  // max |y| over the row, where the output needs it (an fp8 scale per row, or the tensor's amax).
  // NOTE: RMSNorm without bias has max |y| = rstd·max_j |h_j·w_j|, so that max rides in the sum
  // of squares' reduction: without it, the quantizing kernel ran the affine twice and a third
  // reduction, and executed 1.9× the instructions of the bf16-output kernel (ncu, session 6).
  bool wants_amax = false;
  if constexpr (!std::is_same_v<Out, T>) wants_amax = p.quant == QuantScale::PerRow || p.amax != nullptr;
  const bool folds_amax = wants_amax && kind == NormKind::RmsNorm && !biased<kForms>(p);
  float amax = 0.0f;

  // The columns the statistics pass reads: none where the add pass summed them. NOTE: the pass
  // keeps its loop bounded by a count, not under a branch: with `sums_added ? added_sums :
  // centred(…)` LayerNorm without residual ran 2–3 % slower at 32768–65536 bf16 (session 15).
  const int unsummed_n = sums_added ? 0 : n;
  const float inv_n = p.inv_n;
  float mean = 0.0f;
  float variance = 0.0f;  // LayerNorm: mean((h − mean)²); RMSNorm: mean(h²)
  if (kind == NormKind::LayerNorm) {
    const auto centred = [&](float centre, int columns) {
      SumPair dev{0.0f, 0.0f};
      h.template for_each<kAccess>(at.slot, columns, [&](float v, int) {
        dev.first += v - centre;
        dev.second += (v - centre) * (v - centre);
      });
      return dev;
    };
    SumPair sums = centred(0.0f, unsummed_n);  // Σh, Σh²
    sums.first += added_sums.first;
    sums.second += added_sums.second;
    const Moments moments = layer_norm_moments(
        sums, [&](float centre) { return centred(centre, n); },
        [&](auto slot, SumPair v) { return norm_allreduce<decltype(slot)::value>(v, SumPairOp{}, p.layout, parity); },
        inv_n, p.layout);
    mean = moments.mean;
    variance = moments.variance;
  } else if (folds_amax) {
    SumMax stats{0.0f, 0.0f};  // Σ h², max |h·w|, in one pass over the chunks
    for_each_affine(kReadAgain, 0.0f, 1.0f, 1.0f, [&](int, int c, const Pack<T, kE>& hp, const float (&hw)[kE]) {
      float hv[kE];
      unpack_floats<T, kE>(hp, hv);
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        if (!element_in_row<kAccess>(c, e, n)) continue;
        stats.sum += hv[e] * hv[e];
        stats.max = amax_step(stats.max, hw[e]);
      }
    });
    stats = norm_allreduce<2>(stats, SumMaxOp{}, p.layout, parity);
    variance = stats.sum * inv_n;
    amax = stats.max;  // times rstd below
  } else {
    float squares = added_sums.second;
    h.template for_each<kAccess>(at.slot, unsummed_n, [&](float v, int) { squares += v * v; });
    variance = norm_allreduce<2>(squares, SumOp{}, p.layout, parity) * inv_n;
  }
  const float rstd = rsqrtf(variance + p.eps);
  if (live && at.leader()) {
    if (p.mean) p.mean[row] = mean;
    if (p.rstd) p.rstd[row] = rstd;
  }

  float inv_scale = 1.0f;
  if constexpr (!std::is_same_v<Out, T>) {
    if (wants_amax) {
      if (folds_amax) {
        amax *= rstd;
      } else {
        for_each_affine(kReadAgain, mean, rstd, 1.0f, [&](int, int c, const Pack<T, kE>&, const float (&y)[kE]) {
#pragma unroll
          for (int e = 0; e < kE; ++e)
            if (element_in_row<kAccess>(c, e, n)) amax = amax_step(amax, y[e]);
        });
        amax = norm_allreduce<3>(amax, AmaxOp{}, p.layout, parity);
      }
    }
    inv_scale = quantize_factor(p, amax, live && at.leader(), row);
  }

  Out* out = p.y.row<Out>(row, p.rows_per_batch);
  const auto store = [&](int, int c, const Pack<T, kE>&, const float (&y)[kE]) {
    store_pack<Out, kE, kAccess>(out, c, n, pack_floats<Out, kE>(y));
  };
  for_each_affine(std::integral_constant<RowRead, RowRead::Last>{}, mean, rstd, inv_scale, store);
}

// One row group per CTA (or cluster), the row held in registers or, for long rows, staged in
// shared memory; the weight and bias are read through L1.
template <class T, class Out, class Config, Access kAccess, Residence kResidence, NormForms kForms>
__global__ void __launch_bounds__(NormLaunchBounds<T, Out, Config, kForms>::kMaxThreads,
                                  NormLaunchBounds<T, Out, Config, kForms>::kMinCtas)
    norm_forward_kernel(const NormForwardParams p) {
  cluster_begin(p.layout);
  const RowPosition at = RowPosition::of(p.layout);
  const int n = at.row < p.rows ? p.n : 0;
  TileOf<kResidence, T, Config> h(at.slot);
  h.template load<kAccess>(p.x.row<const T>(at.address(p.rows), p.rows_per_batch), at.slot, n);
  const AffineSource<Residence::Registers, T, Config> affine(p, at.slot, n);
  norm_forward_row<T, Out, Config, kAccess, kForms>(p, at, h, affine, 0);
  cluster_finish(p.layout);
}

// Rows staged in shared memory, without a residual: persistent CTA groups (one row per CTA, or per cluster),
// group g of G taking rows g, g + G, …; the weight and bias are staged once, and with two row buffers
// the next row's copy is in flight while this one is reduced and stored (with one, rows too long
// for two, it starts after).
template <class T, class Out, class Config>
__global__ void __launch_bounds__(Config::kMaxThreads, 1) norm_forward_staged_kernel(const NormForwardParams p) {
  using Tile = SharedRowTile<T, Config>;
  cluster_begin(p.layout);
  const RowPosition first = RowPosition::of(p.layout);
  const std::int64_t groups = gridDim.x / p.layout.cluster;
  const AffineSource<Residence::Shared, T, Config> affine(p, first.slot, p.n);
  const int buffers = affine_planes(p.weight, p.bias);
  const bool double_buffered = p.row_buffers == kStagedRowBuffers;
  const auto copy_row = [&](std::int64_t row, int buffer) {
    Tile(first.slot, buffers + buffer).template copy<Access::Vector>(p.x.row<const T>(row, p.rows_per_batch), first.slot, p.n);
  };
  if (first.row < p.rows) copy_row(first.row, 0);
  Tile::commit();
  int iteration = 0;
  for (std::int64_t row = first.row; row < p.rows; row += groups, ++iteration) {
    const int parity = iteration % 2;
    const bool more = row + groups < p.rows;
    const int buffer = double_buffered ? parity : 0;
    if (double_buffered) {
      if (more) copy_row(row + groups, 1 - parity);
      Tile::commit();
      Tile::template wait<1>();  // this row (and the weight and bias) landed; the next may still fly
    } else {
      Tile::template wait<0>();
    }
    Tile h(first.slot, buffers + buffer);
    norm_forward_row<T, Out, Config, Access::Vector, NormForms::Any>(p, RowPosition{row, first.slot}, h, affine, parity);
    if (!double_buffered && more) {
      copy_row(row + groups, 0);  // this thread's own chunks, all read above
      Tile::commit();
    }
  }
  cluster_finish(p.layout);
}

}  // namespace fusekit::device
