// Launchers of the fused norm forward kernels (fusekit/norm.hpp): validation, layout choice,
// dtype and layout dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "../row/row_launch.cuh"
#include "fusekit/device/norm/norm_forward.cuh"
#include "fusekit/device/norm/norm_quantize.cuh"
#include "fusekit/device/norm/norm_quantize_overlapped.cuh"
#include "fusekit/norm.hpp"
#include "fusekit/norm_quantize.hpp"

namespace fusekit {

namespace {

using device::NormForwardParams;
using device::QuantScale;
template <class T, class Out>
using NormConfig = std::conditional_t<std::is_same_v<T, Out>, device::OneTensorRows, device::QuantizingRows>;

constexpr std::initializer_list<DType> kFloatTypes = {DType::F32, DType::F16, DType::BF16};
// The dynamic shared memory a staged norm CTA may take (of the 227 KB an sm_90 CTA may opt into,
// leaving room for the reductions' static scratch).
constexpr std::size_t kStagedSharedBytes = 200 * 1024;

// Everything a norm forward launch reads or writes; residual and quantization optional.
struct NormForwardJob {
  const NormForwardArgs& norm;
  const TensorView* residual = nullptr;
  const TensorView* residual_out = nullptr;
  QuantScale quant = QuantScale::None;
  const TensorView* scale = nullptr;  // PerTensor: [1] input; PerRow: [rows] output
  const TensorView* amax = nullptr;   // optional [1] output
};

rows::RowShape validate(const NormForwardJob& job) {
  const NormForwardArgs& a = job.norm;
  require(a.kind == NormKind::LayerNorm || a.kind == NormKind::RmsNorm, "kind", "LayerNorm or RmsNorm",
          static_cast<int>(a.kind));
  const rows::RowShape shape = rows::check_rows("x", a.x, kFloatTypes);
  const DType out_type = job.quant == QuantScale::None ? a.x.dtype : DType::E4M3;
  rows::check_like("y", a.y, "x", a.x, out_type);
  rows::check_column_vector("weight", a.weight, shape.n, a.x.dtype);
  rows::check_column_vector("bias", a.bias, shape.n, a.x.dtype);
  rows::check_row_stats("mean", a.mean, shape.rows);
  rows::check_row_stats("rstd", a.rstd, shape.rows);
  require(a.kind == NormKind::LayerNorm || a.mean.empty(), "mean", "empty for RMSNorm (it has no mean)",
          a.mean.describe());
  require(std::isfinite(a.eps) && a.eps >= 0.0f, "eps", "finite and >= 0", a.eps);
  if (job.residual) {
    rows::check_like("residual", *job.residual, "x", a.x, a.x.dtype);
    rows::check_like("residual_out", *job.residual_out, "x", a.x, a.x.dtype);
    check::disjoint("y", a.y, "residual_out", *job.residual_out, check::InPlace::Forbidden);
    check::disjoint("residual_out", *job.residual_out, "x", a.x, check::InPlace::Allowed);
    check::disjoint("residual_out", *job.residual_out, "residual", *job.residual, check::InPlace::Allowed);
  }
  if (job.quant == QuantScale::PerTensor) {
    check::structure("scale", *job.scale);
    check::dtype("scale", *job.scale, {DType::F32});
    require(job.scale->numel() == 1, "scale elements", 1, job.scale->numel());
  }
  if (job.quant == QuantScale::PerRow) {
    require(!job.scale->empty() || shape.rows == 0, "scale", "f32 [rows] for PerRow (written: one scale per row)",
            "empty");
    rows::check_row_stats("scale", *job.scale, shape.rows);
  }
  if (job.amax && !job.amax->empty()) {
    check::structure("amax", *job.amax);
    check::dtype("amax", *job.amax, {DType::F32});
    require(job.amax->numel() == 1, "amax elements", 1, job.amax->numel());
  }
  // y may be x's exact view (in place) unless it is e4m3: then its rows would land on other
  // rows of x before those are read.
  check::disjoint("y", a.y, "x", a.x,
                  job.quant == QuantScale::None ? check::InPlace::Allowed : check::InPlace::Forbidden);
  const TensorView none;
  const TensorView* const residual = job.residual ? job.residual : &none;
  const TensorView* const residual_out = job.residual_out ? job.residual_out : &none;
  const TensorView* const scale = job.scale ? job.scale : &none;
  const TensorView* const amax = job.amax ? job.amax : &none;
  // Every other pair with an output shares no byte: the outputs are written while the inputs are
  // still read, by other CTAs.
  check::disjoint_from_each("y", a.y,
                            {{"weight", &a.weight}, {"bias", &a.bias}, {"mean", &a.mean}, {"rstd", &a.rstd},
                             {"residual", residual}, {"scale", scale}, {"amax", amax}});
  check::disjoint_from_each("mean", a.mean,
                            {{"x", &a.x}, {"weight", &a.weight}, {"bias", &a.bias}, {"rstd", &a.rstd},
                             {"residual", residual}, {"residual_out", residual_out}, {"scale", scale},
                             {"amax", amax}});
  check::disjoint_from_each("rstd", a.rstd,
                            {{"x", &a.x}, {"weight", &a.weight}, {"bias", &a.bias}, {"residual", residual},
                             {"residual_out", residual_out}, {"scale", scale}, {"amax", amax}});
  check::disjoint_from_each("residual_out", *residual_out,
                            {{"weight", &a.weight}, {"bias", &a.bias}, {"scale", scale}, {"amax", amax}});
  if (job.quant == QuantScale::PerRow)
    check::disjoint_from_each("scale", *scale,
                              {{"x", &a.x}, {"weight", &a.weight}, {"bias", &a.bias}, {"residual", residual},
                               {"amax", amax}});
  check::disjoint_from_each("amax", *amax,
                            {{"x", &a.x}, {"weight", &a.weight}, {"bias", &a.bias}, {"residual", residual},
                             {"scale", scale}});
  rows::check_on_device({{"x", &a.x}, {"y", &a.y}, {"weight", &a.weight}, {"bias", &a.bias}, {"mean", &a.mean},
                         {"rstd", &a.rstd}, {"residual", residual}, {"residual_out", residual_out},
                         {"scale", scale}, {"amax", amax}});
  return shape;
}

// How a norm's rows read twice take CTAs: add+norm keeps the fewest warps (row_config.hpp).
device::RereadPacking reread_packing(const NormForwardJob& job) {
  return job.residual ? device::RereadPacking::FewestWarps : device::RereadPacking::FillSm;
}

// How many chunks per thread a norm's whole bf16 rows in registers take: the op's config
// (4), or fewer, fuller threads (device::FewThreadRows8 / 16) over the row lengths where they
// ran faster.
// NOTE: measured on the H200 (session 18, bf16, 2^27 elements, GB/s): RMSNorm at 1024 / 2048 /
// 4096 columns 3969 → 4016 / 3940 → 4013 at 8 chunks, 3954 → 4025 at 16 (3954 at 8; at 8192,
// 3972 against 3951 at 16: the op's config); RMSNorm → e4m3 at 4096 / 8192 3873 → 3963 / 3801 →
// 4012 at 8 (3881 / 3818 at 16); on sm_90 the quantizing norms run norm_quantize_persistent_kernel
// there (persistent_quantize), elsewhere norm_quantize_kernel or these.
enum class ThreadChunks : std::uint8_t { OpConfig, Eight, Sixteen };
struct ColumnRange {
  std::int64_t first, last;
  constexpr bool holds(std::int64_t n) const { return n >= first && n <= last; }
};
constexpr ColumnRange kRmsNormEight{1024, 2048}, kRmsNormSixteen{4096, 4096};
constexpr ColumnRange kRmsNormFp8Eight{4096, 8192};

ThreadChunks thread_chunks(const NormForwardJob& job, std::int64_t n) {
  const NormForwardArgs& a = job.norm;
  if (job.residual != nullptr) return ThreadChunks::OpConfig;
  if (job.quant == QuantScale::None) {
    if (a.kind != NormKind::RmsNorm) return ThreadChunks::OpConfig;
    return kRmsNormEight.holds(n)     ? ThreadChunks::Eight
           : kRmsNormSixteen.holds(n) ? ThreadChunks::Sixteen
                                      : ThreadChunks::OpConfig;
  }
  const bool rms_unbiased = a.kind == NormKind::RmsNorm && a.bias.data == nullptr;
  return rms_unbiased && kRmsNormFp8Eight.holds(n) ? ThreadChunks::Eight : ThreadChunks::OpConfig;
}

// How many chunks per thread norm_quantize_persistent_kernel's whole bf16 rows take: four
// (QuantizingRows), or eight (QuantizingRows8) where they ran faster.
// NOTE: measured on the H200 (session 24, bf16, 2^27 elements, GB/s, four → eight chunks):
// LayerNorm → e4m3 3829 → 4011, 3750 → 3935, 3405 → 3432, 3416 → 3906, 2891 → 3283 at 2048 /
// 4096 / 6144 / 8192 / 12288 columns (half the instructions per element for the row's fixed
// costs; ncu at 4096: 61.0 M instructions against 73.4 M, 15.8 warps per SM against 27.5);
// RMSNorm → e4m3 3622 → 4036 at 12288 but 2–3 % slower at 2048–8192 (its rows cost less each).
// At 16384 (session 24, run 6; read again from L2 before): RMSNorm → e4m3 3373 → 3957, LayerNorm →
// e4m3 2334 → 2700 (two 256-thread groups per SM, one for LayerNorm's larger affine).
// Past 16384 (session 26, run 1, against read again from L2; weight and bias as bf16 below):
// LayerNorm → e4m3 2240 → 2440, 2327 → 2689, 2381 → 2988, 2058 → 2948, 2168 → 3077 at 18432 /
// 20480 / 24576 / 28672 / 32768. RMSNorm → e4m3 at 10240 (session 29, run 2; four chunks at 72
// registers before): 3495 → 3993.
constexpr ColumnRange kLayerNormFp8Eight{2048, 32768}, kRmsNormFp8EightPersistent{10240, 16384};
// RMSNorm → e4m3 past 16384 (read again from L2 before; one group of 10–16 warps per SM, the
// weight's floats and two rows filling its shared memory): measured (session 25, run 4) 3234 →
// 3291, 3355 → 3489, 3427 → 3629 at 20480 / 22528 / 24576, but 3228 → 2993 at 18432 (9 warps:
// taken since session 27 at 96 registers, two groups per SM, kRmsNormFp8NativeDense).
constexpr ColumnRange kRmsNormFp8EightLong{18432, 32768};
// Where eight chunks per thread keep the weight and bias as their bf16 values in shared memory
// (device::AffineFormat::Native): where the floats leave room for fewer row groups per SM
// (LayerNorm from 12288, at 14336 one group of 7–8 warps against two; LayerNorm 18432–32768 and
// RMSNorm 26624–32768: none against one).
// NOTE: measured on the H200 (session 26, run 1, bf16, 2^27 elements, GB/s, floats → bf16 values):
// LayerNorm → e4m3 3287 → 3391, 2378 → 3176, 2734 → 3584 at 12288 / 14336 / 16384, none at 10240
// (3282 against 3287); RMSNorm → e4m3 (against read again from L2) 2814 → 3377, 2943 → 3583,
// 3127 → 3751 at 26624 / 28672 / 32768.
constexpr ColumnRange kLayerNormFp8Native{12288, 32768}, kRmsNormFp8Native{26624, 32768};
// Where they take one row buffer per group (device::RowBuffers::One): LayerNorm rows whose bf16
// weight and bias and two rows do not fit a CTA's shared memory (224 KB at 28672, 256 KB at
// 32768). NOTE: measured on the H200 (session 36, run 2, bf16, GB/s): two buffers at 26624 (208 KB)
// 3393 / 3416 → 3460 / 3459 (+1.6 %).
constexpr ColumnRange kLayerNormFp8OneBuffer{28672, 32768};

// Where eight chunks per thread run at device::kEightDenseRegisters (five warps per scheduler, not
// four): where that adds a row group per SM and it ran faster.
// NOTE: measured on the H200 (session 25, bf16, 2^27 elements, GB/s, 104 → 96 registers): LayerNorm
// → e4m3 3432 → 3573 at 6144 (six 96-thread groups per SM against five), but 3929 → 3900, 3991 →
// 3937, 3936 → 3859, 3324 → 3135, 2381 → 2272, 2746 → 2626 at 2048 / 4096 / 8192 / 12288 / 14336 /
// 16384, 3297 → 3202 at 10240 (a group more per SM there too), and RMSNorm → e4m3 4032 → 3924 at
// 12288 (three groups against two).
constexpr ColumnRange kLayerNormFp8EightDense{6144, 6144};
// Where LayerNorm's float-affine rows of eight chunks take their first Σh and Σh² on the tensor
// cores (device::SumsOn::TensorCores): groups of two warps, on GPUs whose DRAM feeds each SM
// fusekit's grids use at least kTensorSumsMinDramPerSm (tensor_sums_pay): there the SMs' issue,
// not the DRAM, bounds these rows, and the sums take the FP32 pipe ~2 instructions a value fewer.
// NOTE: measured on an H100 (docs/performance.md, sessions 58 and 60, bf16, GB/s, LayerNorm →
// e4m3): launched for 92 of its 132 SMs (36 GB/s of peak DRAM an SM, the H200's), per row +8.5 % at
// 32768×4096 (2633 → 2856; ncu: 53.6 → 48.8 M instructions, 150.6 → 140.6 µs), per tensor +1 %;
// on all 132 (25 GB/s an SM) −1.0 to −1.3 %; at 2048 columns (one-warp groups) −0.7 to −1.5 % on
// 92 SMs; −4 to −14 % at 8192–10240 (groups of four and five warps, session 58); −11 % on 7 SMs
// (session 59). Not measured on an H200.
constexpr ColumnRange kLayerNormFp8TensorCoreSums{4096, 4096};
constexpr double kTensorSumsMinDramPerSm = 30e9;  // bytes/s: between the H100's 25 and 36 above
// Whether the device's peak DRAM bandwidth (its memory clock, double data rate, times its bus
// width) over the SMs fusekit's grids use (set_sm_limit) reaches kTensorSumsMinDramPerSm.
bool tensor_sums_pay(const DeviceInfo& device) {
  constexpr double kTransfersPerClock = 2, kHzPerKhz = 1e3, kBitsPerByte = 8;
  const double dram_bytes_per_s =
      kTransfersPerClock * device.memory_clock_khz * kHzPerKhz * device.memory_bus_bits / kBitsPerByte;
  return dram_bytes_per_s >= kTensorSumsMinDramPerSm * device.sm_count;
}
// Where the rows with bf16 weight and bias run at kEightDenseRegisters: two groups of 9–10 warps
// per SM where 104 registers leave room for one (one row buffer each where two do not fit).
// NOTE: measured on the H200 (session 27, runs 3–4, bf16, 2^27 elements, GB/s, one group → two):
// LayerNorm → e4m3 2723 → 3499, 2983 → 3727 at 18432 / 20480; RMSNorm → e4m3 3390 → 4102 at
// 20480, and 3233 → 3916 at 18432 (read again from L2 before).
constexpr ColumnRange kLayerNormFp8NativeDense{18432, 20480}, kRmsNormFp8NativeDense{18432, 20480};
// The shared memory of a CTA of two such groups with two row buffers each, past which they take
// one each (eight_form): the staged norms' 200 KB, under which the measurements above ran.
// LayerNorm → e4m3 with weight and bias at 18432 columns (216 KB with two buffers) takes one;
// kPersistentQuantizeSharedBytes (224 KB) would give it two.
constexpr std::size_t kDenseTwoBufferSharedBytes = 200 * 1024;

// Where eight chunks per thread split each row over a cluster of two CTAs (kPairCtas, the weight
// and bias as bf16; one group of 9–16 warps per SM) past 32768 columns (LayerNorm: where its rows
// are not sliced, kLayerNormFp8Slices).
// NOTE: measured on the H200 (session 26, run 2, bf16, 2^27 elements, GB/s, against read again
// from L2): LayerNorm → e4m3 2065 → 2183, 2155 → 2402, 2215 → 2721, 1878 → 2676, 1900 → 2849 at
// 36864 / 40960 / 49152 / 57344 / 65536; RMSNorm → e4m3 2661 → 3184, 2692 → 3425 at 57344 / 65536,
// but 3011 → 2589, 3010 → 2844, 3196 → 3172 at 36864 / 40960 / 49152 (its L2 rereads cost less:
// one pass fewer than LayerNorm's).
// (LayerNorm at 36864 since session 29: kLayerNormFp8Wide.)
constexpr ColumnRange kLayerNormFp8Pair{40960, 65536}, kRmsNormFp8Pair{57344, 65536};
constexpr int kPairCtas = 2;

// Where LayerNorm's split rows take clusters of CTAs of kSliceThreads (four warps, 8192 columns,
// one row buffer) instead of halves: four CTAs per SM, each on its own row, so one's all-reduces
// and row loads overlap the others' work, where a half row's lone group stalled the SM at both of
// its barriers. Rows of a whole number of slices, at most device::kMaxSplitCtas (65536 columns).
// NOTE: measured on the H200 (session 33, runs 1–2, bf16, 2^27 elements, GB/s, the pair → slices):
// LayerNorm → e4m3 3010 → 3456, 3354 → 3474, 3263 → 3482, 3504 → 3530 at 40960 / 49152 / 57344 /
// 65536. Clusters of four CTAs of 5–8 warps ran 3337 at 40960 (three per SM) but lost 1–3 % at
// 49152–65536 (two per SM), and with two row buffers (one or two per SM) up to 27 %.
constexpr ColumnRange kLayerNormFp8Slices{40960, 65536};
constexpr int kSliceThreads = 4 * device::kWarpThreads;
constexpr std::int64_t kSliceColumns =
    std::int64_t{kSliceThreads} * device::QuantizingRows8::kChunks * (device::kChunkBytes / sizeof(__nv_bfloat16));
bool sliced_rows(const NormForwardJob& job, std::int64_t n) {
  return job.norm.kind == NormKind::LayerNorm && kLayerNormFp8Slices.holds(n) && n % kSliceColumns == 0 &&
         n / kSliceColumns <= device::kMaxSplitCtas;
}

// Norm rows past the slices: a cluster of kMaxSplitCtas CTAs of 8 warps (131072 columns: two CTAs
// per SM) or 16 (262144: one), each CTA's slice and its bf16 weight (and bias) in shared memory,
// where they were staged a CTA per row with the weight and bias read from L2 in every pass.
// NOTE: measured on the H200 (session 42, call 3, bf16, 2^27 elements, GB/s, staged → slices):
// LayerNorm → e4m3 1913 → 3377, 1821 → 3109 at 131072 / 262144; RMSNorm → e4m3 2437 → 3743,
// 2361 → 3435.
constexpr ColumnRange kNormFp8Long{131072, 262144};
constexpr int kLongSliceThreads = 8 * device::kWarpThreads;
bool long_sliced_rows(std::int64_t n) { return kNormFp8Long.holds(n); }

// Where rows past 32768 columns take one CTA of more than 512 threads (one group of 18–20 warps at
// kEightDenseRegisters, one row buffer) rather than a cluster of two CTAs (LayerNorm: of 9 warps,
// one group per SM) or two passes over L2 (RMSNorm): where the weight (and bias) as bf16 and one
// row fit a CTA's shared memory and 96 registers keep five warps per scheduler.
// NOTE: measured on the H200 (session 29, runs 2–3, bf16, 2^27 elements, GB/s): LayerNorm → e4m3
// 2393 → 3310 at 36864 (from the pair); RMSNorm → e4m3 3006 → 3836, 3012 → 3930 at 36864 / 40960
// (from read again from L2).
constexpr ColumnRange kLayerNormFp8Wide{36864, 36864}, kRmsNormFp8Wide{36864, 40960};

// Where RMSNorm → e4m3 rows without a bias keep their bf16 chunks packed in registers
// (NormForms::RmsNormUnbiased, device::rms_quantize_packed_row: half the registers of the row's
// floats at kPackedRegisters): two groups of 11–14 warps per SM where the floats fit one
// (Groups), and one CTA of 24–28 warps past the one-CTA rows of floats (Wide; kRmsNormFp8Wide: at
// most 20 warps at 96 registers).
// NOTE: measured on the H200 (session 30, runs 2–3, bf16, 2^27 elements, GB/s): 3803 → 4030, 3918
// → 4033, 3700 → 3963, 3919 → 3963 at 22528 / 24576 / 26624 / 28672; 3184 → 3730 at 49152 (from
// read again from L2), 3390 → 3683 at 57344 (from the cluster pair). Where the floats already hold
// two groups, or where the packed rows leave one group per SM, they ran slower: 4096 → 4059 at
// 20480 (+0.8 % at 18432), 3954 → 3563, 3830 → 3529, 3926 → 3687 at 32768 / 36864 / 40960 (the
// second unpack of x and w costs more than a lone group hides).
constexpr ColumnRange kRmsNormFp8PackedGroups{22528, 28672}, kRmsNormFp8PackedWide{49152, 57344};
constexpr int kPackedRegisters = 72;  // 28 warps per SM; 0 spills down to 64 (ptxas sm_90a)
// Its shared memory: all a CTA may opt into (227 KB) less its static scratch (the all-reduce's
// partials, 2 KB; ptxas), so 57344 columns' bf16 weight and one row (224 KB) fit.
constexpr std::size_t kPackedQuantizeSharedBytes = 225 * 1024;
bool packed_rms(const NormForwardJob& job, std::int64_t n) {
  return job.norm.kind == NormKind::RmsNorm && job.norm.bias.data == nullptr &&
         (kRmsNormFp8PackedGroups.holds(n) || kRmsNormFp8PackedWide.holds(n));
}

// Rows planned on one CTA of up to kMaxRowThreads (eight_chunk_layout).
bool wide_eight(const NormForwardJob& job, std::int64_t n) {
  return (job.norm.kind == NormKind::LayerNorm ? kLayerNormFp8Wide : kRmsNormFp8Wide).holds(n) || packed_rms(job, n);
}

ThreadChunks quantize_chunks(const NormForwardJob& job, std::int64_t n) {
  const bool eight = job.norm.kind == NormKind::LayerNorm
                         ? kLayerNormFp8Eight.holds(n) || kLayerNormFp8Wide.holds(n) || kLayerNormFp8Pair.holds(n)
                         : kRmsNormFp8EightPersistent.holds(n) || kRmsNormFp8EightLong.holds(n) ||
                               kRmsNormFp8Wide.holds(n) || kRmsNormFp8Pair.holds(n) || packed_rms(job, n);
  return eight || long_sliced_rows(n) ? ThreadChunks::Eight : ThreadChunks::OpConfig;
}

// The shared memory norm_quantize_persistent_kernel's CTA may take: all an sm_90 CTA may opt into
// (227 KB) less the kernel's static scratch (the group all-reduces' partials, 3 KB; ptxas; the
// split kernels' 3.6 KB with the cluster exchange, whose half rows take at most 192 KB).
constexpr std::size_t kPersistentQuantizeSharedBytes = 224 * 1024;

// The layout of bf16 rows of n columns on eight chunks per thread: clusters of CTAs of
// kSliceThreads (sliced_rows) or kLongSliceThreads (long_sliced_rows), one CTA of up to
// kMaxRowThreads (wide_eight), else QuantizingRows8's: one CTA up to 32768 columns, a cluster of
// two (kPairCtas) past them.
device::RowLayout eight_chunk_layout(const NormForwardJob& job, std::int64_t n) {
  if (sliced_rows(job, n))
    return device::plan_rows<device::QuantizingRows8>(n, sizeof(__nv_bfloat16), rows::max_cluster_ctas(),
                                                      kSliceThreads);
  if (long_sliced_rows(n))
    return device::plan_rows<device::QuantizingRows8>(n, sizeof(__nv_bfloat16), rows::max_cluster_ctas(),
                                                      kLongSliceThreads);
  if (wide_eight(job, n))
    return device::plan_rows<device::RowConfig<device::QuantizingRows8::kChunks>>(n, sizeof(__nv_bfloat16), 1,
                                                                                  device::kMaxRowThreads);
  return device::plan_rows<device::QuantizingRows8>(n, sizeof(__nv_bfloat16), rows::max_cluster_ctas());
}

// The register cap of norm_quantize_persistent_kernel's eight-chunk rows (eight_form).
enum class EightRegisters : std::uint8_t {
  ByFormat,  // by the affine format and the row length (launch)
  Dense,     // kEightDenseRegisters (the bf16-affine kernels)
  Packed,    // packed_rms: NormForms::RmsNormUnbiased at kPackedRegisters
};
// How norm_quantize_persistent_kernel's eight-chunk rows of `layout` keep the weight and bias, and
// how many row buffers their groups take, by the columns each CTA holds (split rows: bf16 always).
struct EightForm {
  device::AffineFormat affine;
  device::RowBuffers buffers;
  EightRegisters registers;
  std::size_t budget() const {
    return registers == EightRegisters::Packed ? kPackedQuantizeSharedBytes : kPersistentQuantizeSharedBytes;
  }
};
EightForm eight_form(const NormForwardJob& job, const device::RowLayout& layout) {
  const bool layer_norm = job.norm.kind == NormKind::LayerNorm;
  if (layout.cluster == 1 && packed_rms(job, layout.slice))
    return {device::AffineFormat::Native, device::RowBuffers::One, EightRegisters::Packed};
  const ColumnRange& native = layer_norm ? kLayerNormFp8Native : kRmsNormFp8Native;
  const bool split = layout.cluster > 1;
  const ColumnRange& two_groups = layer_norm ? kLayerNormFp8NativeDense : kRmsNormFp8NativeDense;
  const bool dense = !split && (two_groups.holds(layout.slice) || wide_eight(job, layout.slice));
  constexpr int kDenseGroups = 2;
  const bool two_fit = device::PersistentQuantizeSmem<__nv_bfloat16>(layout.slice, job.norm.weight.data,
                                                                     job.norm.bias.data, kDenseGroups,
                                                                     device::AffineFormat::Native, device::RowBuffers::Two)
                           .bytes() <= kDenseTwoBufferSharedBytes;
  // Slices (more CTAs per row than a pair): four CTAs per SM hold one row buffer each.
  const bool sliced = layout.cluster > kPairCtas;
  const bool one_buffer =
      (layer_norm && kLayerNormFp8OneBuffer.holds(layout.slice)) || (dense && !two_fit) || sliced;
  return {split || dense || native.holds(layout.slice) ? device::AffineFormat::Native : device::AffineFormat::Float,
          one_buffer ? device::RowBuffers::One : device::RowBuffers::Two,
          dense ? EightRegisters::Dense : EightRegisters::ByFormat};
}

// The shared bytes of norm_quantize_persistent_kernel's CTA of one group of `layout`'s rows.
template <class T>
std::size_t persistent_quantize_bytes(const NormForwardArgs& a, const device::RowLayout& layout,
                                      device::AffineFormat affine, device::RowBuffers buffers) {
  return device::PersistentQuantizeSmem<T>(layout.slice, a.weight.data, a.bias.data, 1, affine, buffers).bytes();
}

// Whether a quantizing norm's rows stay in registers on eight chunks per thread although they
// reach kSharedNormMinChunks: whole bf16 rows without a residual on sm_90, where
// norm_quantize_persistent_kernel takes them (launch), in quantize_chunks' lengths.
bool quantizes_eight_in_registers(const NormForwardJob& job, device::Access access, std::int64_t n) {
  const NormForwardArgs& a = job.norm;
  if (job.quant == QuantScale::None || job.residual != nullptr || a.x.dtype != DType::BF16 ||
      access != device::Access::Vector || quantize_chunks(job, n) != ThreadChunks::Eight ||
      current_device_info().cc_major < rows::kClusterMinMajor)
    return false;
  const device::RowLayout layout = eight_chunk_layout(job, n);
  if (!layout.valid() || layout.threads < device::kWarpThreads || !rows::whole_slices(layout, n) ||
      layout.cluster > device::kMaxSplitCtas)
    return false;
  const EightForm form = eight_form(job, layout);
  return persistent_quantize_bytes<__nv_bfloat16>(a, layout, form.affine, form.buffers) <= form.budget();
}

// Where a norm's rows live: in registers while one CTA holds them (without a residual, up to
// kRegisterNormMaxChunks), else read twice (the second time from L2), else staged in shared
// memory; quantizing norms keep rows in registers below kSharedNormMinChunks (and where
// quantizes_eight_in_registers) and read longer ones again from L2 (twice, LayerNorm three times:
// statistics, max |y|, output), else stage them.
// NOTE: measured on the H200 (docs/performance.md): registers against staged at 16384 16-bit
// columns (session 11): LayerNorm 3.70 TB/s against 3.16, add+RMSNorm 3.67 against 3.14, RMSNorm
// 3.92 against 3.74 (persistent); read twice against the previous choice (session 13, bf16):
// LayerNorm 3.18 → 3.70 and 2.63 → 3.22 at 32768 and 65536 columns, RMSNorm 3.80 → 3.96 and
// 3.57 → 3.73 (persistent staged), add+RMSNorm 3.43 → 3.58 (a 2-CTA cluster in registers),
// 2.93 → 3.54 and 2.80 → 3.26 at 131072; LayerNorm and RMSNorm at 131072 (16 chunks per thread)
// ran 6 % and 3 % slower read twice than staged. The quantizing norms lost in registers at
// every length (1.29 against 2.03 at 16384); read again from L2 against staged (session 22, bf16,
// 16384 / 24576 / 32768 / 65536 columns): RMSNorm → e4m3 3.14 → 3.35 / 2.71 → 3.44 / 3.06 → 3.14 /
// 2.63 → 2.68, LayerNorm → e4m3 2.21 → 2.34 / 2.08 → 2.39 / 2.10 → 2.18 / 1.90 → 1.88; at 12288
// (1536 chunks) they lost to the registers (2.65 → 2.21, 3.18 → 2.91).
device::Residence residence_of(const NormForwardJob& job, device::Access access, std::int64_t n) {
  const NormForwardArgs& a = job.norm;
  const int element = static_cast<int>(dtype_size(a.x.dtype));
  const device::Residence staged = rows::residence_for(access, n, a.x.dtype, device::kSharedNormMinChunks);
  const std::int64_t chunks = n / (device::kChunkBytes / element);
  if (job.quant != QuantScale::None) {
    if (quantizes_eight_in_registers(job, access, n)) return device::Residence::Registers;
    if (job.residual == nullptr && access == device::Access::Vector && chunks >= device::kSharedNormMinChunks &&
        device::plan_reread_rows(n, element, reread_packing(job)).valid())
      return device::Residence::Reread;
    return staged;
  }
  if (job.residual == nullptr && access == device::Access::Vector && chunks > device::kRegisterNormMaxChunks &&
      device::plan_reread_rows(n, element, reread_packing(job)).valid())
    return device::Residence::Reread;
  if (staged == device::Residence::Registers) return staged;
  const device::RowLayout in_registers = device::plan_rows<device::OneTensorRows>(n, element, rows::max_cluster_ctas());
  if (in_registers.valid() && in_registers.cluster == 1) return device::Residence::Registers;
  // NOTE: rows past kRereadThreadChunks chunks per thread of a 1024-thread CTA keep more of
  // themselves in L2 at once: there only add+norm rereads (its staged kernel waits on the
  // residual's loads), FewestWarps allowing up to RereadRows::kChunks.
  return device::plan_reread_rows(n, element, reread_packing(job)).valid() ? device::Residence::Reread : staged;
}

// Whether quantizing rows in registers (QuantizingRows `layout`) run
// norm_quantize_persistent_kernel: on sm_90 (bulk copies), for rows of whole warps in one CTA
// whose weight and bias (in `affine`) and row buffers fit a CTA's shared memory.
// NOTE: measured on the H200 (session 23, 2^27 elements, GB/s) against the kernels they ran on
// before: LayerNorm → e4m3 bf16 3566 → 3987, 3289 → 3843, 3306 → 3751, 3068 → 3387, 3006 → 3412,
// 2695 → 2928 at 1024 / 2048 / 4096 / 6144 / 8192 / 12288 columns (norm_quantize_kernel), f16
// 3412 → 3747 and f32 3656 → 4038 at 4096; RMSNorm → e4m3 bf16 without bias (NormForms::
// RmsNormUnbiased, its max |y| in its one all-reduce) 3800 → 3912, 3710 → 3977, 3971 → 4014, 3974 →
// 4057, 3168 → 3595 at 1024 / 2048 / 4096 / 8192 / 12288.
template <class T>
bool persistent_quantize(const NormForwardJob& job, const device::RowLayout& layout, device::AffineFormat affine,
                         device::RowBuffers buffers, int most_ctas = 1,
                         std::size_t budget = kPersistentQuantizeSharedBytes) {
  return current_device_info().cc_major >= rows::kClusterMinMajor && layout.threads >= device::kWarpThreads &&
         layout.cluster <= most_ctas &&
         (buffers == device::RowBuffers::Two || layout.threads > device::kWarpThreads) &&
         persistent_quantize_bytes<T>(job.norm, layout, affine, buffers) <= budget;
}

template <class T, class Out>
void launch(const NormForwardJob& job, const rows::RowShape& shape, cudaStream_t stream) {
  const NormForwardArgs& a = job.norm;
  const TensorView none;
  const TensorView& residual = job.residual ? *job.residual : none;
  const TensorView& residual_out = job.residual_out ? *job.residual_out : none;
  constexpr int kChunkElements = device::kChunkBytes / sizeof(T);

  NormForwardParams p;
  p.x = rows::address(a.x);
  p.residual = rows::address(residual);
  p.residual_out = rows::address(residual_out);
  p.y = rows::address(a.y);
  p.weight = a.weight.data;
  p.bias = a.bias.data;
  p.mean = static_cast<float*>(a.mean.data);
  p.rstd = static_cast<float*>(a.rstd.data);
  p.rows = shape.rows;
  p.rows_per_batch = shape.rows_per_batch;
  p.n = static_cast<int>(shape.n);
  p.inv_n = 1.0f / static_cast<float>(p.n);
  p.eps = a.eps;
  p.kind = a.kind;
  p.quant = job.quant;
  if (job.quant == QuantScale::PerTensor) p.tensor_scale = static_cast<const float*>(job.scale->data);
  if (job.quant == QuantScale::PerRow) p.row_scale = static_cast<float*>(job.scale->data);
  if (job.amax) p.amax = static_cast<float*>(job.amax->data);
  const device::Access access =
      rows::access_for(kChunkElements, shape.n, {&a.x, &a.y, &a.weight, &a.bias, &residual, &residual_out});
  const device::Residence residence = residence_of(job, access, shape.n);
  // Plain bf16 LayerNorm rows of 7–8 whole slices (sliced_rows) on norm_quantize_persistent_kernel's
  // sliced clusters, y stored as bf16.
  // NOTE: measured on the H200 (session 35, 2^27 elements): 3481 → 3686 GB/s at 57344 columns,
  // 3518 → 3730 at 65536 against rows read twice; at 40960 and 49152 the slices lost 2.7 % and
  // 1.5 % (3716 → 3614, 3680 → 3622), so those stay read twice.
  constexpr std::int64_t kPlainSlicesMinColumns = 57344;
  if constexpr (std::is_same_v<T, Out> && std::is_same_v<T, __nv_bfloat16>) {
    if (job.quant == QuantScale::None && job.residual == nullptr && access == device::Access::Vector &&
        shape.n >= kPlainSlicesMinColumns && sliced_rows(job, shape.n) &&
        current_device_info().cc_major >= rows::kClusterMinMajor &&
        shape.rows < device::kPersistentEightMaxRows) {
      p.layout = eight_chunk_layout(job, shape.n);
      const EightForm form = eight_form(job, p.layout);
      if (rows::whole_slices(p.layout, shape.n) &&
          persistent_quantize<T>(job, p.layout, form.affine, form.buffers, device::kMaxSplitCtas, form.budget())) {
        using device::AffineFormat, device::RowBuffers, device::Access;
        using Eight = device::QuantizingRows8;
        const auto go_slices = [&](auto ctas) {
          const auto kernel =
              device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native, RowBuffers::One,
                                                      device::kNativeEightRegisters, decltype(ctas)::value,
                                                      device::NormForms::Any, T>;
          rows::launch_persistent(kernel, p.layout, shape.rows, p, stream, "norm_quantize_persistent_kernel",
                                  persistent_quantize_bytes<T>(a, p.layout, form.affine, form.buffers));
        };
        static_assert(kPlainSlicesMinColumns == 7 * kSliceColumns && kLayerNormFp8Slices.last == 8 * kSliceColumns,
                      "a kernel for each cluster of plain slices");
        switch (p.layout.cluster) {
          case 7: return go_slices(std::integral_constant<int, 7>{});
          case 8: return go_slices(std::integral_constant<int, 8>{});
          default: require(false, "x row slices", "7 or 8 CTAs of a cluster", p.layout.cluster);
        }
      }
    }
  }
  // NOTE: measured on the H200 (docs/performance.md, bf16): the persistent staged kernel ran RMSNorm
  // at 3.57–3.77 TB/s at 16384–32768 columns against 3.17 for a CTA per row, but add+RMSNorm and
  // LayerNorm slower (2.9 against 3.3: each row waits on its residual's loads, one row per CTA at
  // a time; LayerNorm 2.4 against 2.95 even with its guess of the mean loaded a row ahead: with
  // the weight, the bias and two rows its CTAs are 8 warps, one per SM).
  const bool persistent = residence == device::Residence::Shared && a.kind == NormKind::RmsNorm && !job.residual;
  if (persistent) {
    // Persistent CTAs with the weight, the bias and two rows in shared memory, in CTAs narrow
    // enough that every plane fits; one row buffer where two do not fit even in 16-CTA clusters
    // (f32 RMSNorm rows of 262144 with a bias).
    using Config = device::StagedNormRows;
    std::size_t bytes = 0;
    for (p.row_buffers = device::kStagedRowBuffers; p.row_buffers >= 1; --p.row_buffers) {
      const int planes = device::staged_planes(p.weight, p.bias, p.row_buffers);
      const auto plane_budget = static_cast<int>(kStagedSharedBytes / static_cast<std::size_t>(planes));
      const int cta_threads = std::min(Config::kMaxThreads, plane_budget / (Config::kChunks * device::kChunkBytes) /
                                                                device::kWarpThreads * device::kWarpThreads);
      p.layout = rows::plan<Config>("x", shape.n, a.x.dtype, cta_threads);
      bytes = device::SharedRowTile<T, Config>::bytes(p.layout) * static_cast<std::size_t>(planes);
      if (bytes <= kStagedSharedBytes) break;
    }
    require(p.row_buffers >= 1, "x row length", "at most " + std::to_string(device::max_row_length<Config>(
                                                                 static_cast<int>(dtype_size(a.x.dtype)), rows::max_cluster_ctas())) +
                                                    " with weight and bias staged", shape.n);
    rows::launch_persistent(device::norm_forward_staged_kernel<T, Out, Config>, p.layout, shape.rows, p, stream,
                            "norm_forward_staged_kernel", bytes);
    return;
  }
  const bool rms_unbiased = a.kind == NormKind::RmsNorm && a.bias.data == nullptr;
  if constexpr (!std::is_same_v<T, Out>) {
    // Quantizing rows in registers: norm_quantize_persistent_kernel where it runs
    // (persistent_quantize: sm_90), else norm_quantize_kernel (y computed once, in place), except
    // RMSNorm without bias, whose max |y| rides in its one all-reduce (NormForms::RmsNormUnbiased).
    // NOTE: measured on the H200 (session 21, bf16, 2^27 elements): norm_quantize_kernel ran
    // LayerNorm → e4m3 at 3.30–3.53 TB/s at 1024–4096 columns against 2.92–3.09, 2.97 against
    // 2.93 at 8192, 2.62 against 1.99 at 12288; RMSNorm → e4m3 without bias 3.50 against 4.03 at
    // 4096 (two all-reduces against one). Rows staged in shared memory ran 1.6–1.99 TB/s in its
    // registers at 16384–65536 columns (CTAs of up to 256 threads in clusters, or 512) against
    // 1.90–2.21 staged, and LayerNorm → e4m3 1.17–1.77 on the persistent staged kernel.
    if (access == device::Access::Vector && residence == device::Residence::Registers) {
      const auto go_persistent = [&](auto kernel, device::AffineFormat affine, device::RowBuffers buffers) {
        p.layout.rows_per_cta = 1;  // a row per group
        // Rows of one warp use no barrier; longer rows a hardware barrier per group.
        const int max_groups = p.layout.threads > device::kWarpThreads
                                   ? device::kHardwareBarriers - device::kFirstGroupBarrier
                                   : device::kMaxRowThreads / device::kWarpThreads;
        rows::launch_row_groups(kernel, p.layout, max_groups, shape.rows, p, stream, "norm_quantize_persistent_kernel",
                                [&](int groups) {
                                  return device::PersistentQuantizeSmem<T>(p.n, p.weight, p.bias, groups, affine,
                                                                           buffers)
                                      .bytes();
                                });
      };
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        // NOTE: before QuantizingRows' plan: past 16384 columns its rows take clusters.
        using Eight = device::QuantizingRows8;
        if (quantize_chunks(job, shape.n) == ThreadChunks::Eight) {
          p.layout = eight_chunk_layout(job, shape.n);  // as quantizes_eight_in_registers planned it
          const EightForm form = eight_form(job, p.layout);
          if (rows::whole_slices(p.layout, shape.n) && shape.rows < device::kPersistentEightMaxRows &&
              persistent_quantize<T>(job, p.layout, form.affine, form.buffers, device::kMaxSplitCtas, form.budget())) {
            using device::AffineFormat, device::RowBuffers, device::Access;
            constexpr int kNative = device::kNativeEightRegisters;
            if (p.layout.cluster > 1) {
              // A cluster per row, one group per CTA (eight_form: the weight and bias as bf16).
              const auto go_split = [&](auto kernel) {
                rows::launch_persistent(kernel, p.layout, shape.rows, p, stream, "norm_quantize_persistent_kernel",
                                        persistent_quantize_bytes<T>(a, p.layout, form.affine, form.buffers));
              };
              if (p.layout.cluster == kPairCtas) {
                if (form.buffers == RowBuffers::One)
                  return go_split(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native,
                                                                          RowBuffers::One, kNative, kPairCtas>);
                return go_split(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native,
                                                                        RowBuffers::Two, kNative, kPairCtas>);
              }
              // Slices (sliced_rows, long_sliced_rows: one row buffer each).
              // LayerNorm's slices with a scale per row overlap their two cluster all-reduces
              // with the neighbouring rows' work (device/norm/norm_quantize_overlapped.cuh).
              const auto go_slices = [&](auto ctas) {
                if (job.quant == QuantScale::PerRow && sliced_rows(job, shape.n))
                  return go_split(device::norm_quantize_overlapped_kernel<T, decltype(ctas)::value>);
                return go_split(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native,
                                                                        RowBuffers::One, kNative, decltype(ctas)::value>);
              };
              static_assert(kLayerNormFp8Slices.first == 5 * kSliceColumns &&
                                kLayerNormFp8Slices.last == 8 * kSliceColumns,
                            "a kernel for each cluster of slices");
              switch (p.layout.cluster) {
                case 5: return go_slices(std::integral_constant<int, 5>{});
                case 6: return go_slices(std::integral_constant<int, 6>{});
                case 7: return go_slices(std::integral_constant<int, 7>{});
                case 8: return go_slices(std::integral_constant<int, 8>{});
                default: require(false, "x row slices", "5 to 8 CTAs of a cluster", p.layout.cluster);
              }
            }
            if (form.registers == EightRegisters::Packed)
              return go_persistent(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native,
                                                                           RowBuffers::One, kPackedRegisters, 1,
                                                                           device::NormForms::RmsNormUnbiased>,
                                   form.affine, form.buffers);
            constexpr int kDense = device::kEightDenseRegisters;
            if (form.registers == EightRegisters::Dense && form.buffers == RowBuffers::One)
              return go_persistent(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native,
                                                                           RowBuffers::One, kDense>,
                                   form.affine, form.buffers);
            if (form.registers == EightRegisters::Dense)
              return go_persistent(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native,
                                                                           RowBuffers::Two, kDense>,
                                   form.affine, form.buffers);
            if (form.affine == AffineFormat::Native && form.buffers == RowBuffers::One)
              return go_persistent(
                  device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native, RowBuffers::One,
                                                          kNative>,
                  form.affine, form.buffers);
            if (form.affine == AffineFormat::Native)
              return go_persistent(
                  device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Native, RowBuffers::Two,
                                                          kNative>,
                  form.affine, form.buffers);
            if (a.kind == NormKind::LayerNorm && kLayerNormFp8EightDense.holds(shape.n))
              return go_persistent(device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Float,
                                                                           RowBuffers::Two, device::kEightDenseRegisters>,
                                   form.affine, form.buffers);
            if (a.kind == NormKind::LayerNorm && kLayerNormFp8TensorCoreSums.holds(shape.n) &&
                tensor_sums_pay(current_device_info()))
              return go_persistent(
                  device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Float, RowBuffers::Two,
                                                          device::kEightRegisters, 1, device::NormForms::Any,
                                                          __nv_fp8_e4m3, device::SumsOn::TensorCores>,
                  form.affine, form.buffers);
            return go_persistent(
                device::norm_quantize_persistent_kernel<T, Eight, Access::Whole, AffineFormat::Float, RowBuffers::Two>,
                form.affine, form.buffers);
          }
        }
      }
      using Config = device::QuantizingRows;
      p.layout = rows::plan<Config>("x", shape.n, a.x.dtype);
      const bool whole = rows::whole_rows(p.layout, shape.n, shape.rows);
      constexpr auto kFloat = device::AffineFormat::Float;
      constexpr auto kTwo = device::RowBuffers::Two;
      if (persistent_quantize<T>(job, p.layout, kFloat, kTwo)) {
        // NOTE: a row per group, so any number of rows runs whole slices.
        if (rows::whole_slices(p.layout, shape.n))
          return go_persistent(device::norm_quantize_persistent_kernel<T, Config, device::Access::Whole, kFloat, kTwo>,
                               kFloat, kTwo);
        return go_persistent(device::norm_quantize_persistent_kernel<T, Config, device::Access::Vector, kFloat, kTwo>,
                             kFloat, kTwo);
      }
      if (!rms_unbiased) {
        const auto go = [&](auto kernel) {
          rows::launch(kernel, p.layout, shape.rows, p, stream, "norm_quantize_kernel");
        };
        if (whole) return go(device::norm_quantize_kernel<T, Config, device::Access::Whole>);
        return go(device::norm_quantize_kernel<T, Config, device::Access::Vector>);
      }
    }
  }
  rows::with_placement<rows::Residences::RegistersSharedReread>(access, residence, [&](auto kAccess, auto kResidence) {
    using Config = rows::ResidentConfig<NormConfig<T, Out>, kAccess, kResidence>;
    p.layout = kResidence() == device::Residence::Reread
                   ? device::plan_reread_rows(shape.n, static_cast<int>(dtype_size(a.x.dtype)), reread_packing(job))
                   : rows::plan<Config>("x", shape.n, a.x.dtype);
    const auto go = [&](auto kernel) {
      rows::launch(kernel, p.layout, shape.rows, p, stream, "norm_forward_kernel",
                   rows::shared_bytes<kResidence, T, Config>(p.layout));
    };
    using device::NormForms;
    // NOTE: rows in registers that are exactly their layout's slices (4096 columns, and most
    // hidden sizes) run kernels without chunk tests (Access::Whole): at 32768×4096 bf16 (session
    // 11) LayerNorm +2 %, add+RMSNorm +3 %, RMSNorm → e4m3 +14 %, LayerNorm → e4m3 +8 %; plain
    // RMSNorm, memory-bound with or without them, ran 0.5–1.8 % slower as Whole and keeps its
    // tests. RMSNorm → e4m3 without bias runs its own form (70–74 registers against 78 for Any
    // at 4096 bf16 columns, sessions 7–11), f16 → e4m3 with its tests: as Whole it took 127
    // registers against 95 (−5 % at 4096 columns), and under a cap of 80 it spilled (session 12).
    constexpr bool kRegisterVectors = kAccess() == device::Access::Vector && kResidence() == device::Residence::Registers;
    [[maybe_unused]] constexpr device::Access kWhole = device::Access::Whole;  // unused by f16 → e4m3
    if constexpr (kRegisterVectors) {
      [[maybe_unused]] const bool whole = rows::whole_rows(p.layout, shape.n, shape.rows);
      // Whole rows on fewer, fuller threads (thread_chunks): bf16 only. NOTE: f16 spilled there
      // (its conversions take more registers: 76 bytes at 16 chunks, 8 at 8; ptxas, sm_90a), and
      // f16 → e4m3 has no Whole kernels (below).
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        const ThreadChunks chunks = thread_chunks(job, shape.n);
        // Launches the kernel of `config` and `forms` if its layout holds the rows whole.
        const auto go_whole = [&](auto config, auto forms) {
          using FewConfig = decltype(config);
          const device::RowLayout layout = rows::plan<FewConfig>("x", shape.n, a.x.dtype);
          if (!rows::whole_rows(layout, shape.n, shape.rows)) return false;
          p.layout = layout;
          go(device::norm_forward_kernel<T, Out, FewConfig, kWhole, kResidence, decltype(forms)::value>);
          return true;
        };
        using AnyForm = std::integral_constant<NormForms, NormForms::Any>;
        if constexpr (std::is_same_v<T, Out>) {
          if (chunks == ThreadChunks::Eight && go_whole(device::FewThreadRows8{}, AnyForm{})) return;
          if (chunks == ThreadChunks::Sixteen && go_whole(device::FewThreadRows16{}, AnyForm{})) return;
        } else if (chunks == ThreadChunks::Eight) {
          using UnbiasedForm = std::integral_constant<NormForms, NormForms::RmsNormUnbiased>;
          if (go_whole(device::FewThreadRows8{}, UnbiasedForm{})) return;
        }
      }
      if constexpr (std::is_same_v<T, Out>) {
        if (whole && a.kind == NormKind::LayerNorm && job.residual == nullptr &&
            p.layout.block_threads() <= device::ShortRows::kMaxThreads) {
          p.layout = rows::plan<device::ShortRows>("x", shape.n, a.x.dtype);
          return go(device::norm_forward_kernel<T, Out, device::ShortRows, kWhole, kResidence, NormForms::Any>);
        }
        if (whole && (a.kind == NormKind::LayerNorm || job.residual != nullptr))
          return go(device::norm_forward_kernel<T, Out, Config, kWhole, kResidence, NormForms::Any>);
      } else {
        // Quantizing rows in registers come here only as RMSNorm without bias (norm_quantize_kernel
        // took the others, above).
        if constexpr (!std::is_same_v<T, __half>) {
          if (whole) return go(device::norm_forward_kernel<T, Out, Config, kWhole, kResidence, NormForms::RmsNormUnbiased>);
        }
        return go(device::norm_forward_kernel<T, Out, Config, kAccess, kResidence, NormForms::RmsNormUnbiased>);
      }
    }
    if constexpr (std::is_same_v<T, Out> || !kRegisterVectors)
      go(device::norm_forward_kernel<T, Out, Config, kAccess, kResidence, NormForms::Any>);
  });
}

void run(const NormForwardJob& job, cudaStream_t stream) {
  const rows::RowShape shape = validate(job);
  if (shape.rows == 0) return;
  const bool fp8 = job.quant != QuantScale::None;
  switch (job.norm.x.dtype) {
    case DType::F32:
      return fp8 ? launch<float, __nv_fp8_e4m3>(job, shape, stream) : launch<float, float>(job, shape, stream);
    case DType::F16:
      return fp8 ? launch<__half, __nv_fp8_e4m3>(job, shape, stream) : launch<__half, __half>(job, shape, stream);
    case DType::BF16:
      return fp8 ? launch<__nv_bfloat16, __nv_fp8_e4m3>(job, shape, stream)
                 : launch<__nv_bfloat16, __nv_bfloat16>(job, shape, stream);
    default: throw_invalid("x dtype", "f32, f16 or bf16", dtype_name(job.norm.x.dtype));
  }
}

}  // namespace

void norm_forward(const NormForwardArgs& args, cudaStream_t stream) { run({args}, stream); }

void add_norm_forward(const AddNormForwardArgs& args, cudaStream_t stream) {
  run({args.norm, &args.residual, &args.residual_out}, stream);
}

void norm_quantize_forward(const NormQuantizeArgs& args, cudaStream_t stream) {
  require(args.scale_mode == Fp8ScaleMode::PerTensor || args.scale_mode == Fp8ScaleMode::PerRow, "scale_mode",
          "PerTensor or PerRow", static_cast<int>(args.scale_mode));
  const QuantScale quant = args.scale_mode == Fp8ScaleMode::PerTensor ? QuantScale::PerTensor : QuantScale::PerRow;
  run({args.norm, nullptr, nullptr, quant, &args.scale, &args.amax}, stream);
}

}  // namespace fusekit
