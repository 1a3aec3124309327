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
//
// Two kernels run the row (norm_quantize_row): norm_quantize_kernel, a CTA per row group that
// loads its row and the weight and bias from global memory, and on sm_90
// norm_quantize_persistent_kernel, persistent CTAs of several row groups with the weight and bias
// as floats in shared memory (no conversions per row) and each row brought into shared memory by a
// bulk copy a row ahead (its latency hidden under the row before).
// NOTE: measured on the H200 (session 23, LayerNorm → e4m3 bf16 at 32768×4096): the persistent
// kernel with rows loaded into registers ran 72.5 M instructions against 79.4 M but issued on 66 %
// of cycles against 72 % (+1.4 %); with the bulk copies 73.4 M at 73 %: 3.31 → 3.75 TB/s.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include "fusekit/device/norm/norm_forward.cuh"
#include "fusekit/device/row/cluster_exchange.cuh"
#include "fusekit/device/row/mma_sums.cuh"

namespace fusekit::device {

// The register cap of norm_quantize_kernel: the row's 32 values per thread, each chunk's weight
// and bias, and the row's addresses, without spills (ptxas): 72 on sm_90a (seven 128-thread CTAs
// per SM), 80 on sm_80, whose software e4m3 conversion spilled 4 bytes at 72.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
inline constexpr int kQuantizeMaxRegisters = 80;
#else
inline constexpr int kQuantizeMaxRegisters = 72;
#endif

// Where norm_quantize_row reads a chunk's weight and bias, as floats.
// From global memory, packed in T (L1 and L2 hold them: every row reads the same).
template <class T>
struct GlobalAffine {
  static constexpr int kE = kChunkBytes / sizeof(T);
  const T* weight;
  const T* bias;
  int n;

  static constexpr int kParts = 1;  // of a chunk, read apart
  static constexpr bool kWalks = false;  // read by column (SharedAffine::kWalks)
  template <class Terms, Access kAccess, Bf16Widen kWiden = Bf16Widen::Shift>
  __device__ __forceinline__ void get(int c, int, float (&w)[kE], float (&b)[kE]) const {
    if constexpr (Terms::kWeight)
      unpack_floats<T, kE, kWiden>(load_pack<T, kE, Cache::Keep, kAccess>(weight, c, n), w);
    if constexpr (Terms::kBias) unpack_floats<T, kE, kWiden>(load_pack<T, kE, Cache::Keep, kAccess>(bias, c, n), b);
  }
};

// Where SharedAffine's bias planes lie: after the weight's where there is a weight, else first
// (Packed), or after the weight's place always (Fixed: an offset that needs no select on p.weight,
// one register fewer; QuantizingRows8 fits 96 registers without spills with it, ptxas sm_90a, and
// the four-chunk kernels spilled 24 bytes at 72).
enum class BiasPlanes { Packed, Fixed };

// How SharedAffine keeps the weight and bias: as floats, converted once per CTA (Float), or as
// the tensors' own 16-bit values, converted at every use (Native: half the shared memory, so a
// row group more fits an SM where the floats leave room for fewer; src/norm/norm_forward.cu).
enum class AffineFormat { Float, Native };

// The shared bytes of SharedAffine's n columns of weight and bias (those present) in `format`, the
// weight's place reserved wherever there is a bias (either BiasPlanes fits).
template <class T>
__host__ __device__ std::size_t shared_affine_bytes(int n, const void* w, const void* b, AffineFormat format) {
  constexpr int kE = kChunkBytes / sizeof(T);
  const auto chunks = static_cast<std::size_t>((n + kE - 1) / kE);
  const std::size_t value_bytes = format == AffineFormat::Float ? sizeof(float) : sizeof(T);
  return chunks * kE * value_bytes * ((w || b ? 1 : 0) + (b ? 1 : 0));
}

// From shared memory (norm_quantize_persistent_kernel): as floats, two 16-byte shared loads per
// chunk of a 16-bit T replace a global load and eight conversions; as 16-bit values, one 16-byte
// load and the conversions. Plane k holds values kPart·k … kPart·(k + 1) − 1 of every chunk, so a
// warp's loads are consecutive.
template <class T, BiasPlanes kBiasPlanes, AffineFormat kFormat, bool kWalk>
struct SharedAffine {
  static_assert(kFormat == AffineFormat::Float || sizeof(T) == 2, "Native: 16-bit values");
  static constexpr int kE = kChunkBytes / sizeof(T);
  // Values of a chunk per plane: four floats (a 16-byte load), or a whole chunk of 16-bit values.
  // NOTE: Native chunks in two 8-byte planes took two loads and their addresses per term and
  // chunk (LayerNorm → e4m3 at 32768 bf16 columns: 44 of the affine's 396 instructions per
  // thread and row were addresses, ncu, session 27).
  static constexpr int kPart = kFormat == AffineFormat::Float ? 4 : kE;
  static constexpr int kPlanes = kE / kPart;
  static constexpr int kChunkShift = std::countr_zero(static_cast<unsigned>(kE));  // c / kE = c >> kChunkShift
  static constexpr int kStagedInFlight = 4;  // chunks per thread loaded at once while staging
  using Plane = std::conditional_t<kFormat == AffineFormat::Float, float4, Pack<T, kPart>>;
  const Plane* weight;  // kPlanes planes of `chunks` each
  const Plane* bias;
  int chunks;
  int first;  // the first chunk held (of the CTA's slice of a row split over a cluster)

  // Stages the CTA's copy of columns [begin, begin + columns) of rows of whole chunks (every
  // thread of the CTA takes part; a barrier must follow).
  __device__ SharedAffine(void* smem, const NormForwardParams& p, int begin, int columns)
      : chunks((columns + kE - 1) / kE), first(begin >> kChunkShift) {
    const bool after_weight = kBiasPlanes == BiasPlanes::Fixed || p.weight != nullptr;
    Plane* const weight_planes = static_cast<Plane*>(smem);
    Plane* const bias_planes = weight_planes + (after_weight ? static_cast<std::size_t>(chunks) * kPlanes : 0);
    // NOTE: kStagedInFlight chunks per thread are loaded before any is stored, so their L2
    // latencies overlap: one chunk at a time, the staging's dependent loads were 4.6 % of the
    // stall samples of LayerNorm → e4m3 at 32768 bf16 columns (16 per thread; ncu, session 27).
    const auto stage = [&](const T* from, Plane* to) {
      const auto threads = static_cast<int>(blockDim.x);
      for (int q0 = static_cast<int>(threadIdx.x); q0 < chunks; q0 += kStagedInFlight * threads) {
        Pack<T, kE> batch[kStagedInFlight];
#pragma unroll
        for (int j = 0; j < kStagedInFlight; ++j)
          batch[j] = load_pack<T, kE, Cache::Keep, Access::Vector>(from, begin + (q0 + j * threads) * kE, begin + columns);
#pragma unroll
        for (int j = 0; j < kStagedInFlight; ++j) {
          const int q = q0 + j * threads;
          if (q >= chunks) break;
          if constexpr (kFormat == AffineFormat::Float) {
            float v[kE];
            unpack_floats<T, kE>(batch[j], v);
#pragma unroll
            for (int k = 0; k < kPlanes; ++k)
              to[k * chunks + q] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
          } else {
#pragma unroll
            for (int k = 0; k < kPlanes; ++k) {
              Pack<T, kPart> part;
#pragma unroll
              for (int e = 0; e < kPart; ++e) part.e[e] = batch[j].e[k * kPart + e];
              to[k * chunks + q] = part;
            }
          }
        }
      }
    };
    if (p.weight) stage(static_cast<const T*>(p.weight), weight_planes);
    if (p.bias) stage(static_cast<const T*>(p.bias), bias_planes);
    weight = weight_planes;
    bias = bias_planes;
  }

  // kWalk: the planes are walked by a byte offset (norm_quantize_row): chunk i of a thread lies
  // i · step() bytes past chunk 0 in each plane, one add per chunk where the column's step, shift
  // and mask and each plane's base took five (SASS sm_90a, the bf16 weight and bias).
  // NOTE: eight chunks per thread only: the four-chunk kernels spilled 20 bytes at 72 registers
  // with it (ptxas sm_90a); see norm_quantize_persistent_kernel. Measured on the H200
  // (session 28, run 3, bf16): LayerNorm → e4m3 +3.0 % at 65536 columns, +2.9 % at 10240, +1 % at
  // 8192 / 16384 / 32768, unchanged at 4096 / 12288 / 24576, −1.3 % at 2048 (one-warp groups);
  // RMSNorm → e4m3 +2 % at 65536.
  static constexpr bool kWalks = kWalk;
  // The offset of the thread's chunk 0 (chunk t of the CTA's slice: its columns start on a chunk).
  __device__ __forceinline__ static int first_offset(const RowSlot& slot) {
    return slot.t * static_cast<int>(sizeof(Plane));
  }
  __device__ __forceinline__ static int step(const RowSlot& slot) {
    return slot.threads * static_cast<int>(sizeof(Plane));
  }
  template <class Terms, Bf16Widen kWiden = Bf16Widen::Shift>
  __device__ __forceinline__ void get_at(int offset, int k, float (&w)[kPart], float (&b)[kPart]) const {
    if constexpr (Terms::kWeight)
      to_floats<kWiden>(*reinterpret_cast<const Plane*>(reinterpret_cast<const char*>(weight + k * chunks) + offset),
                        w);
    if constexpr (Terms::kBias)
      to_floats<kWiden>(*reinterpret_cast<const Plane*>(reinterpret_cast<const char*>(bias + k * chunks) + offset), b);
  }

  // Part k of chunk c: one plane's values of each term, so a chunk's float terms take 8 registers
  // at a time, not 16 (norm_quantize_persistent_kernel spilled at 72 with whole chunks).
  static constexpr int kParts = kPlanes;
  template <class Terms, Access, Bf16Widen kWiden = Bf16Widen::Shift>
  __device__ __forceinline__ void get(int c, int k, float (&w)[kPart], float (&b)[kPart]) const {
    // NOTE: a shift (columns are not negative): the signed division by kE and its fix-ups took
    // ~6 instructions per chunk (SASS, sm_90a); its unsigned form spilled the four-chunk kernels.
    const int q = (c >> kChunkShift) - first;
    if constexpr (Terms::kWeight) to_floats<kWiden>(weight[k * chunks + q], w);
    if constexpr (Terms::kBias) to_floats<kWiden>(bias[k * chunks + q], b);
  }

 private:
  template <Bf16Widen kWiden = Bf16Widen::Shift>
  __device__ __forceinline__ static void to_floats(const Plane v, float (&out)[kPart]) {
    if constexpr (kFormat == AffineFormat::Float) out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    else unpack_floats<T, kPart, kWiden>(v, out);
  }
};

// Whether norm_quantize_row's all-reduce call site `site` is its row's first: LayerNorm's moments
// (0), RMSNorm's Σh² (2).
constexpr bool is_first_allreduce(int site) { return site == 0 || site == 2; }

// Where a quantizing row's first Σh and Σh² are taken: on the FP32 pipe from the unpacked floats,
// or on the tensor cores from the packed chunks (MmaRowSums), which leaves the FP32 pipe ~2
// instructions a value fewer. A far-off mean's re-centred sums stay on the FP32 pipe.
enum class SumsOn : std::uint8_t { Fp32Pipe, TensorCores };
// SumsOn::Fp32Pipe's stand-in for MmaRowSums: the sums are taken from the floats, nothing is held.
struct FloatRowSums {};

// How norm_quantize_row schedules its row, where the registers allow more than the least.
struct QuantizeRowSchedule {
  int loads_ahead = 1;  // chunk i's weight and bias loads wait on chunk i − loads_ahead's y (1 or 2)
  int amax_chains = 1;  // max |y| as this many independent maxima, joined at the end (1 or 2)
  int sum_chains = 1;   // LayerNorm's Σh and Σh² as this many independent sums each (1 or 2)
  Bf16Widen widen = Bf16Widen::Shift;  // of the even bf16 values of x, weight and bias
  SumsOn sums = SumsOn::Fp32Pipe;
};

// How a quantizing row's max |y| reaches the tensor's amax (p.amax), and where a PerTensor row
// finds its factor 1/scale:
//   Atomic: from the row's leader, after the row's all-reduce of it even where the scale is
//           PerTensor, by filtered_atomic_amax; 1/scale loaded and divided per row
//           (quantize_factor): the kernels of a CTA per row group;
//   Row:    from the row's leader, after the row's all-reduce, by cta_filtered_atomic_amax;
//   Warp:   from each warp's first lane, the warp's max of its lanes' values (the row's
//           all-reduced max |y| for PerRow, each lane's own values' for PerTensor, without an
//           all-reduce), by cta_filtered_atomic_amax.
// Row and Warp are the persistent kernel's, which stages 1/scale once per CTA
// (staged_tensor_factor).
// NOTE: Atomic and Row cost PerTensor rows with an amax a second all-reduce each. Atomic's L2
// load and division wait on every row: measured on the H200 (session 49, bf16 32768×4096, GB/s)
// RMSNorm → e4m3 on the four-chunk kernel ran 3446–3461 against 3991–4016 with a scale per row.
enum class TensorAmax { Atomic, Row, Warp };

// The CTA's running max of the values it has recorded into a tensor's amax (TensorAmax::Row and
// Warp), zeroed by its first thread before the CTA's first barrier.
__device__ __forceinline__ int& cta_amax_bits() {
  __shared__ int bits;
  return bits;
}

// atomic_amax, filtered by the CTA's running max (a shared atomic): the global atomic only where
// `value` raises it, a few times over a persistent CTA's many rows. Every value is recorded: by
// this thread, or by the one that raised the running max to it or above.
// NOTE: no L2 load waited on (filtered_atomic_amax's, every row) and no code after the row loop
// (a record of parts there spilled the four-chunk kernels at their caps: 24 bytes, ptxas sm_90a).
__device__ __forceinline__ void cta_filtered_atomic_amax(float* amax, float value) {
  const int bits = __float_as_int(value);
  if (atomicMax(&cta_amax_bits(), bits) < bits) atomic_amax(amax, value);
}

// A persistent CTA's PerTensor factor 1/scale, computed once by its first thread (the scale is
// given before the launch and the kernel never writes it). NOTE: per row, the scale's load and
// an exact division cost every thread ~10 instructions.
__device__ __forceinline__ float& staged_tensor_factor() {
  __shared__ float factor;
  return factor;
}

// quantize_scale in a persistent CTA: a PerTensor row takes the CTA's staged 1/scale.
__device__ __forceinline__ float staged_quantize_scale(const NormForwardParams& p, float amax, bool leader,
                                                       std::int64_t row) {
  return p.quant == QuantScale::PerTensor ? staged_tensor_factor() : quantize_scale(p, amax, leader, row);
}

// The factor of a quantizing row's stores (quantize_scale) whose max |y| is `amax` (all-reduced),
// that max folded into the tensor's amax as kTensorAmax (Atomic or Row) says.
template <TensorAmax kTensorAmax>
__device__ __forceinline__ float row_factor(const NormForwardParams& p, float amax, bool leader, std::int64_t row) {
  static_assert(kTensorAmax != TensorAmax::Warp, "the row's max, all-reduced");
  if constexpr (kTensorAmax == TensorAmax::Atomic) {
    return quantize_factor(p, amax, leader, row);
  } else {
    if (leader && p.amax != nullptr) cta_filtered_atomic_amax(p.amax, amax);
    return staged_quantize_scale(p, amax, leader, row);
  }
}

// The shift of y = (h·rstd + shift)·w + b (AffineForm::Folded) over a row's floats v: −mean·rstd,
// or 0 with v centred in place where |mean·rstd| exceeds kFoldedShiftMax, so the affine loop is
// compiled once per combination of terms.
template <int kChunks, int kE>
__device__ __forceinline__ float folded_shift(float (&v)[kChunks][kE], float mean, float rstd) {
  float shift = -mean * rstd;
  if (fabsf(shift) > kFoldedShiftMax) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i)
#pragma unroll
      for (int e = 0; e < kE; ++e) v[i][e] -= mean;
    shift = 0.0f;
  }
  return shift;
}

// f(AffineTerms<…>{}) for the launch's weight and bias, as AffineForm::Folded takes them (it reads
// no kCentred: the shift carries the mean).
template <class F>
__device__ __forceinline__ void with_folded_terms(const NormForwardParams& p, F&& f) {
  if (p.weight != nullptr) {
    if (p.bias != nullptr) f(AffineTerms<true, true, true>{});
    else f(AffineTerms<true, false, true>{});
  } else {
    if (p.bias != nullptr) f(AffineTerms<false, true, true>{});
    else f(AffineTerms<false, false, true>{});
  }
}

// One quantizing row, `row` (live: row < rows), of which this thread holds `slot`'s chunks `h`
// (chunks past the row read as 0, so they add nothing to Σh and Σh²); `allreduce(site, v, op)`
// reduces v over the row's threads at call site `site` (0 … 3).
// Out = T: the row's y stored as T, unquantized (no max |y|, no scale).
template <class T, class Config, Access kAccess, QuantizeRowSchedule kSchedule = QuantizeRowSchedule{},
          class Out = __nv_fp8_e4m3, TensorAmax kTensorAmax = TensorAmax::Atomic, class Affine, class AllReduce>
__device__ __forceinline__ void norm_quantize_row(const NormForwardParams& p, std::int64_t row, bool live,
                                                  const RowSlot& slot, const RowTile<T, Config>& h,
                                                  const Affine& affine, AllReduce&& allreduce) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  constexpr int kChunks = Tile::kChunks;
  static_assert(kAccess != Access::Scalar, "whole chunks: a chunk is in its row or past it");
  const int n = live ? p.n : 0;
  const bool leader = live && slot.t == 0 && slot.begin == 0;
  constexpr bool kQuantizes = std::is_same_v<Out, __nv_fp8_e4m3>;
  static_assert(kQuantizes || std::is_same_v<Out, T>, "e4m3, or y as T");
  constexpr bool kTensorSums = kSchedule.sums == SumsOn::TensorCores;
  static_assert(!kTensorSums || (kAccess == Access::Whole && sizeof(T) == 2 && kE == 8),
                "tensor-core sums: whole chunks of eight 16-bit values");
  // NOTE: every lane of the warp takes the row (groups are whole warps), as mma.sync needs.
  [[maybe_unused]] std::conditional_t<kTensorSums, MmaRowSums<T>, FloatRowSums> tensor_sums;

  float v[kChunks][kE];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if constexpr (kTensorSums) tensor_sums.add(h.get(i));
    unpack_floats<T, kE, kSchedule.widen>(h.get(i), v[i]);
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
    // NOTE: one chain of sums is kChunks · kE dependent adds per thread and row.
    constexpr int kSumChains = kSchedule.sum_chains;
    static_assert(kSumChains == 1 || kSumChains == 2, "one or two partial sums");
    const auto centred = [&](float centre) {
      SumPair dev[kSumChains] = {};
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        if (!chunk_in_row<kAccess>(Tile::column(slot, i), n)) continue;
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          SumPair& chain = dev[e % kSumChains];
          chain.first += v[i][e] - centre;
          chain.second += (v[i][e] - centre) * (v[i][e] - centre);
        }
      }
#pragma unroll
      for (int j = 1; j < kSumChains; ++j) dev[0] = SumPairOp{}(dev[0], dev[j]);
      return dev[0];
    };
    SumPair first_sums;
    if constexpr (kTensorSums) first_sums = tensor_sums.partial();
    else first_sums = centred(0.0f);
    const Moments moments = layer_norm_moments(
        first_sums, centred, [&](auto site, SumPair v) { return allreduce(site, v, SumPairOp{}); }, inv_n, p.layout);
    mean = moments.mean;
    variance = moments.variance;
  } else {
    float squares = 0.0f;
    if constexpr (kTensorSums) {
      squares = tensor_sums.partial().second;
    } else {
#pragma unroll
      for (int i = 0; i < kChunks; ++i)
#pragma unroll
        for (int e = 0; e < kE; ++e) squares += v[i][e] * v[i][e];
    }
    variance = allreduce(std::integral_constant<int, 2>{}, squares, SumOp{}) * inv_n;
  }
  const float rstd = rsqrtf(variance + p.eps);
  if (leader) {
    if (p.mean) p.mean[row] = mean;
    if (p.rstd) p.rstd[row] = rstd;
  }

  // y in place, and max |y| over the thread's chunks in the row, as (h·rstd + shift)·w + b
  // (AffineForm::Folded) for every row.
  const float shift = folded_shift(v, mean, rstd);
  constexpr int kLoadsAhead = kSchedule.loads_ahead;
  constexpr int kAmaxChains = kSchedule.amax_chains;
  static_assert(kLoadsAhead == 1 || kLoadsAhead == 2, "a chain on the last chunk's y or the one before");
  static_assert(kAmaxChains == 1 || kAmaxChains == 2, "one or two partial maxima");
  // NOTE: one chain of maxima is kChunks · kE dependent FMNMX per thread and row.
  [[maybe_unused]] float partial_amax[kAmaxChains] = {};
  const auto affine_all = [&](auto terms) {
    using Terms = decltype(terms);
    float chain = 0.0f, chain_before = 0.0f;  // the last chunk's y, the one before's
    [[maybe_unused]] int at = 0;  // kWalks: the byte offset of chunk i's weight and bias
    if constexpr (Affine::kWalks) at = Affine::first_offset(slot);
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      int c = Tile::column(slot, i);
      if constexpr (Affine::kWalks)
        if (i > 0) at += Affine::step(slot);
      if (!chunk_in_row<kAccess>(c, n)) continue;
      // NOTE: each chunk's weight and bias loads wait on the previous chunk's y (an empty asm
      // dependency on the column, or on the walk's offset): with every chunk's loads hoisted above
      // the first use, the kernel spilled at 80 registers. Two ahead (on the y before the last), a
      // chunk's loads may be issued while the previous chunk computes, where the registers allow it.
      const float after = kLoadsAhead == 2 ? chain_before : chain;
      if constexpr (Affine::kWalks) {
        if (i >= kLoadsAhead) asm volatile("" : "+r"(at) : "f"(after));
      } else {
        if (i >= kLoadsAhead) asm volatile("" : "+r"(c) : "f"(after));
      }
      constexpr int kPart = kE / Affine::kParts;
#pragma unroll
      for (int k = 0; k < Affine::kParts; ++k) {
        float w[kPart], b[kPart];
        if constexpr (Affine::kWalks) affine.template get_at<Terms, kSchedule.widen>(at, k, w, b);
        else affine.template get<Terms, kAccess, kSchedule.widen>(c, k, w, b);
        affine_floats_in_place<Terms, AffineForm::Folded>(v[i] + k * kPart, w, b, shift, rstd);
      }
      chain_before = chain;
      chain = v[i][kE - 1];
      if constexpr (kQuantizes)
#pragma unroll
        for (int e = 0; e < kE; ++e)
          partial_amax[e % kAmaxChains] = amax_step(partial_amax[e % kAmaxChains], v[i][e]);
    }
  };
  with_folded_terms(p, affine_all);
  float inv_scale = 1.0f;
  if constexpr (kQuantizes) {
    float amax = partial_amax[0];
#pragma unroll
    for (int j = 1; j < kAmaxChains; ++j) amax = amax_join(amax, partial_amax[j]);
    constexpr bool kWarpParts = kTensorAmax == TensorAmax::Warp;
    if (p.quant == QuantScale::PerRow || (!kWarpParts && p.amax != nullptr))
      amax = allreduce(std::integral_constant<int, 3>{}, amax, AmaxOp{});
    if constexpr (!kWarpParts) {
      inv_scale = row_factor<kTensorAmax>(p, amax, leader, row);
    } else {
      inv_scale = staged_quantize_scale(p, amax, leader, row);
      // Every lane of the warp takes this row (groups are whole warps).
      if (p.amax != nullptr) {
        const float warp_part = warp_amax(amax);
        if (threadIdx.x % kWarpThreads == 0) cta_filtered_atomic_amax(p.amax, warp_part);
      }
    }
  }

  auto* out = p.y.row<Out>(row, p.rows_per_batch);
  // kWalks: the stores walk the row too (a 64-bit add per chunk, where the column's shift, sign
  // extension and 64-bit add took five instructions; SASS sm_90a).
  auto* walk = out + Tile::column(slot, 0);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = Tile::column(slot, i);
    if constexpr (Affine::kWalks)
      if (i > 0) walk += slot.threads * kE;
    if (!chunk_in_row<kAccess>(c, n)) continue;
    if constexpr (kQuantizes)
#pragma unroll
      for (int e = 0; e < kE; ++e) v[i][e] *= inv_scale;
    const auto q = pack_floats<Out, kE>(v[i]);
    if constexpr (Affine::kWalks) store_pack<Out, kE, Access::Whole>(walk, 0, n, q);
    else store_pack<Out, kE, kAccess>(out, c, n, q);
  }
}

// One RMSNorm row without a bias, q = sat(h·w·(rstd·s)), of which this thread holds `slot`'s
// whole chunks `h`, kept as T: Σh² and max |h·w| in one pass and one all-reduce (amax =
// rstd·max |h·w|, as norm_forward_row folds it), then the output pass unpacks h and reads w again.
// The row takes half the registers of norm_quantize_row's floats (eight bf16 chunks: 32 against
// 64), for a second unpack of x and w per element, so more warps fit an SM
// (norm_quantize_persistent_kernel with NormForms::RmsNormUnbiased).
template <class T, class Config, class Affine, class AllReduce>
__device__ __forceinline__ void rms_quantize_packed_row(const NormForwardParams& p, std::int64_t row,
                                                        const RowSlot& slot, const RowTile<T, Config>& h,
                                                        const Affine& affine, AllReduce&& allreduce) {
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  constexpr int kChunks = Tile::kChunks;
  constexpr int kPart = kE / Affine::kParts;
  const bool leader = slot.t == 0 && slot.begin == 0;
  // Calls use(i, k, x, w) for part k of each chunk i: its kPart values of h and of the weight (or
  // ones). NOTE: each chunk's weight load waits on the previous chunk's result (`chain`, an empty
  // asm dependency), as norm_quantize_row's: hoisted, the loads hold registers the row needs.
  const auto each_part = [&](auto weighted, auto&& use) {
    float chain = 0.0f;
    [[maybe_unused]] int at = 0;  // kWalks: the byte offset of chunk i's weight
    if constexpr (Affine::kWalks) at = Affine::first_offset(slot);
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      float x[kE];
      unpack_floats<T, kE>(h.get(i), x);
      int c = Tile::column(slot, i);
      if constexpr (Affine::kWalks) {
        if (i > 0) at += Affine::step(slot);
        if (i > 0) asm volatile("" : "+r"(at) : "f"(chain));
      } else {
        if (i > 0) asm volatile("" : "+r"(c) : "f"(chain));
      }
#pragma unroll
      for (int k = 0; k < Affine::kParts; ++k) {
        float w[kPart], unused[kPart];
        if constexpr (decltype(weighted)::value) {
          using Terms = AffineTerms<true, false, false>;
          if constexpr (Affine::kWalks) affine.template get_at<Terms>(at, k, w, unused);
          else affine.template get<Terms, Access::Whole>(c, k, w, unused);
        } else {
#pragma unroll
          for (int e = 0; e < kPart; ++e) w[e] = 1.0f;
        }
        chain = use(i, k, x + k * kPart, w);
      }
    }
  };
  const auto both = [&](auto&& use) {
    if (p.weight != nullptr) each_part(std::true_type{}, use);
    else each_part(std::false_type{}, use);
  };

  SumMax stats{0.0f, 0.0f};
  both([&](int, int, const float* x, const float (&w)[kPart]) {
#pragma unroll
    for (int e = 0; e < kPart; ++e) {
      stats.sum += x[e] * x[e];
      stats.max = amax_step(stats.max, x[e] * w[e]);
    }
    return stats.max;
  });
  stats = allreduce(std::integral_constant<int, 2>{}, stats, SumMaxOp{});
  const float rstd = rsqrtf(stats.sum * p.inv_n + p.eps);
  if (leader) {
    if (p.mean) p.mean[row] = 0.0f;
    if (p.rstd) p.rstd[row] = rstd;
  }
  const float factor = rstd * row_factor<TensorAmax::Row>(p, stats.max * rstd, leader, row);

  // The stores walk the row (norm_quantize_row's reason).
  auto* walk = p.y.row<__nv_fp8_e4m3>(row, p.rows_per_batch) + Tile::column(slot, 0);
  float q[kE];
  both([&](int i, int k, const float* x, const float (&w)[kPart]) {
#pragma unroll
    for (int e = 0; e < kPart; ++e) q[k * kPart + e] = x[e] * factor * w[e];
    if (k == Affine::kParts - 1) {
      store_pack<__nv_fp8_e4m3, kE, Access::Whole>(walk + i * slot.threads * kE, 0, p.n,
                                                  pack_floats<__nv_fp8_e4m3, kE>(q));
    }
    return q[k * kPart + kPart - 1];
  });
}

// A CTA (or cluster) per row group, the row read from global memory into registers, the weight
// and bias read from global memory.
template <class T, class Config, Access kAccess>
__global__ void __maxnreg__(kQuantizeMaxRegisters) norm_quantize_kernel(const NormForwardParams p) {
  cluster_begin(p.layout);
  const RowPosition at = RowPosition::of(p.layout);
  const bool live = at.row < p.rows;
  const std::int64_t row = at.address(p.rows);
  RowTile<T, Config> h(at.slot);
  h.template load<kAccess>(p.x.row<const T>(row, p.rows_per_batch), at.slot, live ? p.n : 0);
  const GlobalAffine<T> affine{static_cast<const T*>(p.weight), static_cast<const T*>(p.bias), p.n};
  norm_quantize_row<T, Config, kAccess>(
      p, row, live, at.slot, h, affine,
      [&](auto site, auto v, auto op) { return row_allreduce<decltype(site)::value>(v, op, p.layout); });
  cluster_finish(p.layout);
}

// How many row buffers each of norm_quantize_persistent_kernel's groups has: two (the row in use
// and the next landing: its copy issued a row ahead), or one where two do not fit (the next row's
// copy issued once every thread of the group has read this one, at its first all-reduce).
// NOTE: measured on the H200 (session 24): a third buffer (two rows in flight) ran LayerNorm →
// e4m3 1–2.5 % slower at 2048–8192 columns: the rows' latency does not bound them.
enum class RowBuffers : int { One = 1, Two = 2 };

// The shared memory of norm_quantize_persistent_kernel's CTA of `groups` rows: the weight and bias
// (SharedAffine, in `format`), then each group's row buffers, then an mbarrier per buffer.
template <class T>
struct PersistentQuantizeSmem {
  std::size_t affine_bytes, row_bytes;
  int groups, buffers;

  __host__ __device__ PersistentQuantizeSmem(int n, const void* weight, const void* bias, int groups,
                                             AffineFormat format, RowBuffers buffers)
      : affine_bytes(shared_affine_bytes<T>(n, weight, bias, format)),
        row_bytes(static_cast<std::size_t>(n) * sizeof(T)),
        groups(groups),
        buffers(static_cast<int>(buffers)) {}
  __host__ __device__ std::size_t buffers_offset() const { return affine_bytes; }
  __host__ __device__ std::size_t barriers_offset() const {
    return affine_bytes + static_cast<std::size_t>(groups) * buffers * row_bytes;
  }
  __host__ __device__ std::size_t bytes() const {
    return barriers_offset() + static_cast<std::size_t>(groups) * buffers * sizeof(std::uint64_t);
  }
};

// QuantizingRows8's register cap in norm_quantize_persistent_kernel: four warps per scheduler.
inline constexpr int kEightRegisters = 104;

// Persistent CTAs of row groups (p.layout's rows of whole warps, blockDim.x / threads of them per
// CTA; sm_90), the weight and bias staged in shared memory once per CTA (kAffine) and each
// row copied into shared memory by one bulk copy, issued a row ahead by the group's first thread.
// Group g of CTA b takes rows (b + k·gridDim.x)·groups + g; its all-reduces meet at its own
// barrier (RowGroup) and alternate two scratch slots per call site from row to row
// (norm_allreduce's reason). Rows are whole 16-byte chunks with 16-byte aligned starts. Rows split
// over a cluster (kSplitCtas): cluster c takes rows c + k·(gridDim.x / kSplitCtas), its CTA of rank r
// holds columns [r·slice, (r + 1)·slice) of each (their weight, bias and copies), and each
// all-reduce ends with quantize_exchange across the cluster.
// NOTE: the next row's copy goes into the buffer the group read one row before: every thread of
// the group has read it before that row's first all-reduce, which the copying thread has passed.
// Its register cap: on QuantizingRows, kQuantizeMaxRegisters for whole rows (seven 128-thread
// groups per SM), eight more where chunks may lie past the row (their tests spilled 12 bytes at
// 72, ptxas sm_90a); on QuantizingRows8 (whole rows only), 104 (four warps per scheduler), or
// where the host asks (src/norm/norm_forward.cu) kEightDenseRegisters (kLayerNormFp8EightDense and
// the bf16-affine pairs of groups of 9–10 warps) or kNativeEightRegisters (the other bf16-affine
// rows).
// kForms = NormForms::RmsNormUnbiased runs RMSNorm rows without a bias on rms_quantize_packed_row
// (the row kept as T: fewer registers, so wider groups fit an SM).
// kSums = SumsOn::TensorCores takes each row's first Σh and Σh² on the tensor cores (MmaRowSums):
// only the float-affine kernel of eight chunks at kEightRegisters (the others spilled, or lost
// where their groups are four or more warps: docs/performance.md, session 58).
template <class Config, Access kAccess>
inline constexpr int kPersistentQuantizeMaxRegisters =
    Config::kChunks == QuantizingRows8::kChunks ? kEightRegisters
                                                : kQuantizeMaxRegisters + (kAccess == Access::Whole ? 0 : 8);
// QuantizingRows8 at five warps per scheduler: the 64 values and the addresses fit without spills
// by 32-bit row indices and BiasPlanes::Fixed (136 bytes spilled without them, ptxas sm_90a).
inline constexpr int kEightDenseRegisters = 96;
// QuantizingRows8 with the weight and bias as bf16 (AffineFormat::Native) outside the dense
// kernels: one group of 11–16 warps per SM, or two of 6–8 (their weight, bias and row buffers
// fill its shared memory), or rows split over a cluster (one CTA of 10–16 warps per SM), so 16
// warps at most hold an SM's registers.
// NOTE: measured on the H200 (session 32, bf16, GB/s, from 104 registers): the split rows, with the
// butterfly and the loads two chunks ahead that 104 registers did not hold (the split kernel of
// two buffers spilled), LayerNorm → e4m3 2657 → 2864 / 2998 → 3202 / 3130 → 3213 / 3317 → 3452 at
// 40960 / 49152 / 57344 / 65536, RMSNorm → e4m3 3697 → 3864 at 65536 (run 1); one CTA of one row
// buffer, with the loads two chunks ahead, 3264 → 3347 / 3441 → 3483 / 3615 → 3685 at 26624 /
// 28672 / 32768; of two, +0.3–0.7 % at 12288 / 16384 / 22528 / 24576 (run 3). (Session 28, before
// the IMAD widening and the second amax chain: 128 registers without the loads ahead lost 2 % at
// 22528–24576 and 57344–65536.)
inline constexpr int kNativeEightRegisters = 128;
// How many CTAs hold each of norm_quantize_persistent_kernel's rows (kSplitCtas): one CTA's
// group, or a cluster of CTAs of one group each (bf16 rows past 32768 columns on QuantizingRows8:
// halves, or slices of four warps; src/norm/norm_forward.cu), whose slices' weight, bias and row
// buffers fit a CTA's shared memory where the whole row's do not. NOTE: the cluster size is a
// constant of the kernel: read from the layout, the LayerNorm kernel of one row buffer spilled 20
// bytes at 104 registers (ptxas, sm_90a).
inline constexpr int kMaxSplitCtas = kMaxClusterCtas;
// The call sites of norm_quantize_row's all-reduces, each in two slots alternated from row to row.
inline constexpr int kQuantizeSites = 4;

// The cluster exchange of norm_quantize_persistent_kernel's split rows (kSplitCtas > 1 only:
// kernels that do not split rows reserve no shared memory for it).
using QuantizeExchange = ClusterAllReduce<2 * kQuantizeSites, sizeof(SumPair) / sizeof(std::uint32_t)>;
__device__ __forceinline__ QuantizeExchange& quantize_exchange() {
  __shared__ QuantizeExchange exchange;
  return exchange;
}

// The most rows norm_quantize_persistent_kernel takes on QuantizingRows8 (32-bit row indices, with
// room for the rows in flight ahead).
inline constexpr std::int64_t kPersistentEightMaxRows = std::int64_t{1} << 31;

template <class T, class Config, Access kAccess, AffineFormat kAffine, RowBuffers kRowBuffers,
          int kMaxRegisters = kPersistentQuantizeMaxRegisters<Config, kAccess>, int kSplitCtas = 1,
          NormForms kForms = NormForms::Any, class Out = __nv_fp8_e4m3, SumsOn kSums = SumsOn::Fp32Pipe>
__global__ void __maxnreg__(kMaxRegisters) norm_quantize_persistent_kernel(
    const NormForwardParams p) {
  static_assert(kForms == NormForms::Any || kAccess == Access::Whole, "packed RMSNorm rows: whole chunks");
  static_assert(kSums == SumsOn::Fp32Pipe ||
                    (kAffine == AffineFormat::Float && Config::kChunks == QuantizingRows8::kChunks &&
                     kMaxRegisters == kEightRegisters && kForms == NormForms::Any),
                "tensor-core sums: the float-affine kernel of eight chunks at kEightRegisters");
  static_assert(kForms == NormForms::Any || std::is_same_v<Out, __nv_fp8_e4m3>, "packed RMSNorm rows: e4m3");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // First, while nothing else is live: the division's slow path is a call, and placed before the
  // barrier below it spilled the eight-chunk float-affine kernels at their caps (ptxas sm_90a:
  // 60–92 bytes at 96–104 registers).
  constexpr bool kQuantizes = std::is_same_v<Out, __nv_fp8_e4m3>;
  if constexpr (kQuantizes) {
    if (threadIdx.x == 0) {
      cta_amax_bits() = 0;
      if (p.quant == QuantScale::PerTensor) staged_tensor_factor() = 1.0f / *p.tensor_scale;
    }
  }
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  using Smem = PersistentQuantizeSmem<T>;
  // Eight chunks fit their caps by 32-bit row indices (the host keeps their rows below
  // kPersistentEightMaxRows; 64-bit ones spilled 4 bytes at 104), and the dense cap by the bias
  // planes at a fixed offset too.
  constexpr bool kEight = Config::kChunks == QuantizingRows8::kChunks;
  constexpr bool kDense = kMaxRegisters == kEightDenseRegisters;
  using Row = std::conditional_t<kEight, std::uint32_t, std::int64_t>;
  const auto rows = static_cast<Row>(p.rows);
  constexpr int kBuffers = static_cast<int>(kRowBuffers);
  // NOTE: 128-byte aligned, whatever the static shared bytes before it: with 3088 of them (16-byte
  // aligned only) every rung ran 5–12 % slower on the H100 (session 49), where 3072 and 3200 did not.
  extern __shared__ __align__(128) float4 smem[];
  static_assert(kSplitCtas >= 1 && kSplitCtas <= kMaxSplitCtas, "a CTA, or a portable cluster of them");
  constexpr bool kClustered = kSplitCtas > 1;
  const auto threads = static_cast<unsigned>(p.layout.threads);
  const auto group = static_cast<int>(threadIdx.x / threads);
  const auto groups = static_cast<int>(blockDim.x / threads);
  const int t = static_cast<int>(threadIdx.x - group * threads);
  // The CTA's slice of its rows: columns [begin, begin + columns) (the whole row unless split).
  const int rank = kClustered ? static_cast<int>(cute::block_rank_in_cluster()) : 0;
  const int columns = kClustered ? p.layout.slice : p.n;
  const int begin = rank * columns;
  const RowSlot slot{begin, t, static_cast<int>(threads)};
  const RowSlot staged_slot{0, t, static_cast<int>(threads)};  // in the row buffer, the slice only
  const RowGroup row_group{kFirstGroupBarrier + group, group * static_cast<int>(threads / kWarpThreads)};
  const Smem layout(columns, p.weight, p.bias, groups, kAffine, kRowBuffers);
  auto* const base = reinterpret_cast<char*>(smem);
  T* const buffers = reinterpret_cast<T*>(base + layout.buffers_offset()) + std::size_t{kBuffers} * group * columns;
  auto* const landed = reinterpret_cast<std::uint64_t*>(base + layout.barriers_offset()) + kBuffers * group;
  const bool copier = t == 0;
  const auto bytes = static_cast<std::uint32_t>(layout.row_bytes);
  const auto copy_row = [&](Row row, int buffer) {
    Barrier::arrive_and_expect_tx(&landed[buffer], bytes);
    cute::SM90_BULK_COPY_G2S::copy(p.x.row<const T>(row, p.rows_per_batch) + begin, &landed[buffer],
                                   buffers + buffer * columns, static_cast<std::int32_t>(bytes));
  };

  // The bf16-affine kernels (the long rows) issue the first rows' copies before the weight and
  // bias are staged, so their latency runs under the staging (the group's other threads wait on
  // them only past the barrier below). NOTE: measured on the H200 (session 31, run 5, bf16, GB/s):
  // LayerNorm → e4m3 2614 → 2657 / 3189 → 3240 at 40960 / 65536 (the split rows), +0.4–0.6 % at
  // 14336–32768, −0.6 % at 12288; RMSNorm → e4m3 +0.8 % at 65536. The float-affine kernels, at
  // their caps, spilled 8–40 bytes with it (ptxas sm_90a): they copy after the barrier.
  constexpr bool kCopiesFirst = kAffine == AffineFormat::Native;
  // The group's rows: first, first + step, …; a cluster per row group when split (one group per
  // CTA), else a CTA per `groups` of them. (Computed where each use needs them: the copies issued
  // first take them before the affine's staging, the loop after it.)
  const auto first_row = [&] { return Row{blockIdx.x} / kSplitCtas * groups + group; };
  const auto row_step = [&] { return Row{gridDim.x} / kSplitCtas * groups; };
  const auto init_landed = [&] {
    for (int b = 0; b < kBuffers; ++b) Barrier::init(&landed[b], 1);
    cutlass::arch::fence_barrier_init();
  };
  // The rows in flight before the loop (one buffer: the first row).
  constexpr int kFirstCopies = std::max(kBuffers - 1, 1);
  const auto copy_first_rows = [&](Row first, Row step) {
    for (int b = 0; b < kFirstCopies && first + b * step < rows; ++b) copy_row(first + b * step, b);
  };
  if constexpr (kCopiesFirst) {
    if (copier) {
      init_landed();
      copy_first_rows(first_row(), row_step());
    }
  }
  // NOTE: the walk spilled the one-buffer kernel at kEightDenseRegisters (12 bytes, ptxas sm_90a).
  const SharedAffine<T, kDense ? BiasPlanes::Fixed : BiasPlanes::Packed, kAffine, kEight && !kDense> affine(
      smem, p, begin, columns);
  const Row first = first_row();
  const Row step = row_step();
  std::uint32_t phases = 0;  // of quantize_exchange's slots
  if constexpr (!kCopiesFirst)
    if (copier) init_landed();
  __syncthreads();  // the affine, the barriers, the CTA's running amax and the factor
  if constexpr (kClustered) quantize_exchange().start();
  // The rows in flight ahead of this one at the loop's top (one buffer: none).
  const Row lead = Row{kBuffers - 1} * step;
  if constexpr (!kCopiesFirst)
    if (copier) copy_first_rows(first, step);
  // The bf16-affine kernels take the groups of nine to sixteen warps (rows of 18432 columns and
  // up): their partials by a butterfly (measured on the H200, session 27, run 2, LayerNorm → e4m3
  // bf16: +6 % at 18432–32768, +3.7 % at 12288 from the amax's redux; RMSNorm → e4m3 +5 % at
  // 26624). The float-affine ones, at their caps, spilled 12–104 bytes with it (ptxas sm_90a).
  constexpr WarpCombine kCombine = kAffine == AffineFormat::Native ? WarpCombine::Butterfly : WarpCombine::Tree;
  // How the bf16-affine rows on eight chunks run norm_quantize_row: the even bf16 values of x,
  // weight and bias widened by IMAD on the FMA pipe, not by shifts on the ALU pipe (their busiest:
  // unpacks, maxima, conversions); at kNativeEightRegisters max |y| in two chains and a chunk's
  // weight and bias loaded two chunks ahead of their use (session 31, at 104 registers and two row
  // buffers: LayerNorm → e4m3 3861 → 3950 at 16384; one buffer ran 0.4–0.5 % slower with it there).
  // NOTE: measured on the H200 (session 32, runs 1–2, bf16, GB/s against the minimum bytes):
  // LayerNorm → e4m3 by IMAD +3.5–5 % at 12288–36864 (18432 3521 → 3671, 32768 3499 → 3620),
  // 16384 +0.4 %; the two chains +0.6–2 % more at 12288–32768 where IMAD was in (−1.4 to −2.8 % on
  // the split kernels at 104 registers, +0.8–1.3 % at 57344–65536 at 128); RMSNorm → e4m3 at 18432
  // (the 96-register kernel) −1.3 % (3980 → 3930); two chains there lost 0.3–1 % at 18432–20480
  // (run 3). On everything, IMAD lost 1–3 % at 2048–16384 (session 27: the float-affine kernels and
  // the four-chunk ones).
  constexpr bool kNativeEight = kEight && kAffine == AffineFormat::Native;
  constexpr bool kRoomy = kMaxRegisters >= kNativeEightRegisters;
  // LayerNorm's sums in two chains there too (session 33, run 1: +3.1 % at 12288, +4.2 % at 22528,
  // 3472 → 3617; +0.3–1 % at 16384 and 26624–65536).
  constexpr QuantizeRowSchedule kSchedule{
      .loads_ahead = kNativeEight && kRoomy ? 2 : 1,
      .amax_chains = kNativeEight && kRoomy ? 2 : 1,
      .sum_chains = kNativeEight && kRoomy ? 2 : 1,
      .widen = kNativeEight ? Bf16Widen::Multiply : Bf16Widen::Shift,
      .sums = kSums,
  };
  // The rows' max |y| reaches the tensor's amax warp by warp (TensorAmax::Warp) on the bf16-affine
  // eight-chunk kernels; the others take the row's, all-reduced as a per-row scale's is
  // (TensorAmax::Row), as the packed RMSNorm rows do. NOTE: the four-chunk kernels, at their caps,
  // spilled 4–104 bytes with Warp (ptxas sm_90a); on the float-affine eight-chunk ones Warp left a
  // row's two warps nothing to meet at after their sums, and ran the per-tensor rung 6 % slower
  // than the per-row one at 92 SMs with 6 % fewer instructions (ncu, H100, session 61). With Row
  // (H100, session 62, LayerNorm → e4m3 32768×4096 bf16, GB/s): per tensor 2695 → 2914 at 92 SMs,
  // 2992 → 2985 at 132; per row 2854 → 2889 and 2978 → 2982.
  constexpr TensorAmax kTensorAmax = kEight && kAffine == AffineFormat::Native ? TensorAmax::Warp : TensorAmax::Row;
  int k = 0;
  for (Row row = first; row < rows; row += step, ++k) {
    const int buffer = k % kBuffers;
    if constexpr (kBuffers > 1)
      if (copier && row + lead < rows) copy_row(row + lead, (k + kBuffers - 1) % kBuffers);
    Barrier::wait(&landed[buffer], (k / kBuffers) & 1);
    RowTile<T, Config> h(slot);
    h.template load_staged<kAccess>(buffers + buffer * columns, staged_slot, columns);
    const int parity = k & 1;
    const auto allreduce = [&](auto site, auto v, auto op) {
      constexpr int kSite = decltype(site)::value;
      static_assert(2 * kQuantizeSites <= kGroupSlots, "both parities' call sites in group_partials");
      // NOTE: the bf16-affine kernels compile one copy of each all-reduce, its slot chosen by the
      // parity at run time (measured on the H200, session 32, run 8, bf16 LayerNorm → e4m3 against
      // two copies behind a branch: +1.1–2.7 % at 12288 and 18432–65536, −0.7 % at 16384); the
      // float-affine and four-chunk ones, at their caps, spilled 8–152 bytes with it (ptxas
      // sm_90a) and branch between two copies.
      auto reduced = [&] {
        if constexpr (kAffine == AffineFormat::Native)
          return group_allreduce<kSite, kCombine>(v, op, p.layout, row_group, kQuantizeSites * parity);
        else
          return parity == 0 ? group_allreduce<kSite, kCombine>(v, op, p.layout, row_group)
                             : group_allreduce<kSite + kQuantizeSites, kCombine>(v, op, p.layout, row_group);
      }();
      // One buffer: every thread of the group has read the row before its first all-reduce
      // (multi-warp groups meet at a barrier there; the host asks for them).
      if constexpr (kBuffers == 1 && is_first_allreduce(decltype(site)::value))
        if (copier && row + step < rows) copy_row(row + step, 0);
      if constexpr (kClustered)
        reduced = quantize_exchange().allreduce(kSite + kQuantizeSites * parity, reduced, op, rank, kSplitCtas, phases);
      return reduced;
    };
    if constexpr (kForms == NormForms::RmsNormUnbiased) {
      rms_quantize_packed_row<T, Config>(p, row, slot, h, affine, allreduce);
    } else {
      norm_quantize_row<T, Config, kAccess, kSchedule, Out, kTensorAmax>(p, row, true, slot, h, affine, allreduce);
    }
  }
#endif
}

}  // namespace fusekit::device
