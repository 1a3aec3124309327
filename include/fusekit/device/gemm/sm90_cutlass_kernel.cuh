#pragma once
// The Hopper GEMM of fusekit's Level 2: CUTLASS 3's TMA warp-specialized cooperative mainloop
// (two consumer warpgroups on a 128×256 tile, a producer warp issuing TMA, a persistent tile
// scheduler) with the epilogue written as an epilogue visitor tree (EVT) from fusekit's chain.
// Device types only; src/gemm/sm90_cutlass_gemm_*.cu instantiate them.
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "fusekit/device/gemm/scale_bias_act_params.hpp"
#include "fusekit/device/gemm/sm90_amax.cuh"
#include "fusekit/device/gemm/sm90_gated_epilogue.cuh"
#include "fusekit/device/pointwise/activation.cuh"
#include "fusekit/fused_gemm.hpp"

namespace fusekit::device::sm90 {

using namespace cute;
namespace fusion = cutlass::epilogue::fusion;

// Two schedules of the same mainloop:
//  Cooperative: both consumer warpgroups share one 128×256 tile (a 2×1 cluster multicasts each
//    B tile to two CTAs); the epilogue runs after the tile's last k-block.
//  Pingpong: each consumer warpgroup owns a 128×128 tile and they alternate, so one's epilogue
//    (bias, GELU, the residual's loads) runs under the other's mainloop.
template <Sm90Schedule kSchedule> struct ScheduleTraits;
template <> struct ScheduleTraits<Sm90Schedule::Cooperative> {
  using TileShape = Shape<_128, _256, _64>;
  using ClusterShape = Shape<_2, _1, _1>;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
template <> struct ScheduleTraits<Sm90Schedule::Pingpong> {
  using TileShape = Shape<_128, _128, _64>;
  using ClusterShape = Shape<_2, _1, _1>;
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};
using Accumulator = float;
using Compute = float;
inline constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

template <class Element>
inline constexpr int kAlignment = 128 / cutlass::sizeof_bits<Element>::value;  // 16 bytes: TMA

// A per-column bias of a row-major D is a row vector broadcast down the rows.
template <class Element, class TileShape>
using ColumnBias =
    fusion::Sm90RowBroadcast<0, TileShape, Element, Compute, Stride<_0, _1, int64_t>, kAlignment<Element>>;

// x = acc + bias[j]
template <class Element, class TileShape>
using AccPlusBias = fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, Compute, Compute, kRound>,
                                    fusion::Sm90AccFetch, ColumnBias<Element, TileShape>>;

// D = acc
template <class Element, class TileShape>
using IdentityEvt = fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::Identity, Element, Compute, kRound>,
                                    fusion::Sm90AccFetch>;

// D = gelu_tanh(acc + bias)
template <class Element, class TileShape>
using BiasGeluEvt =
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, Element, Compute, kRound>,
                    AccPlusBias<Element, TileShape>>;

// D = gelu_tanh(acc + bias) + R, R read through the epilogue's source (C) TMA pipeline
template <class Element, class TileShape>
using BiasGeluResidualEvt = fusion::Sm90EVT<
    fusion::Sm90Compute<cutlass::plus, Element, Compute, kRound>,
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, Compute, Compute, kRound>,
                    AccPlusBias<Element, TileShape>>,
    fusion::Sm90SrcFetch<Element>>;

// A per-row scale r[i] (f32) is a column vector broadcast along the columns; a per-column scale
// c[j] (f32) a row vector broadcast down the rows. Absent (null), each reads as 1.
template <class TileShape>
using RowScale = fusion::Sm90ColBroadcast<0, TileShape, float, Compute, Stride<_1, _0, int64_t>>;
template <class TileShape>
using ColumnScale = fusion::Sm90RowBroadcast<0, TileShape, float, Compute, Stride<_0, _1, int64_t>>;

// y = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi), with α, act, lo and hi at run time
// (ScaleBiasActParams), as a CUTLASS compute functor of the accumulator, r, c and b.
// NOTE: the Cooperative epilogue runs between a tile's mainloop and the next, so its instructions
// add to every tile: the activation is chosen once per fragment, not per value (chain.cuh's
// reason), and a chain without scales or clamp skips their instructions (six per value). The
// clamp is written with comparisons, so that a NaN passes as NaN (fminf/fmaxf would return a
// bound).
template <class T>
struct ScaleBiasAct {
  using Arguments = ScaleBiasActParams;  // Sm90Compute reads the arguments' type here
};
template <int N>
struct ScaleBiasAct<cutlass::Array<float, N>> {
  using Arguments = ScaleBiasActParams;
  using Fragment = cutlass::Array<float, N>;
  CUTLASS_DEVICE Fragment operator()(Fragment const& acc, Fragment const& row_scale, Fragment const& col_scale,
                                     Fragment const& bias, Arguments const& p) const {
    Fragment y;
    if (p.scaled) {
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < N; ++v) y[v] = fmaf(p.alpha * acc[v], row_scale[v] * col_scale[v], bias[v]);
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < N; ++v) y[v] = acc[v] + bias[v];
    }
    const auto each = [&](auto act) {
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < N; ++v) y[v] = act(y[v]);
    };
    switch (p.activation) {
      case Activation::Identity: break;
      case Activation::Relu: each([](float x) { return fmaxf(x, 0.0f); }); break;
      case Activation::GeluTanh: each([](float x) { return gelu_tanh_fast(x); }); break;
      case Activation::GeluErf: each([](float x) { return gelu_erf(x); }); break;
      case Activation::Silu: each([](float x) { return silu_fast(x); }); break;
    }
    if (!isinf(p.lo) || !isinf(p.hi)) each([&](float x) { return x < p.lo ? p.lo : (x > p.hi ? p.hi : x); });
    return y;
  }
};

// y = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi), converted to Out
template <class Element, class TileShape, class Out>
using ScaleBiasActTree = fusion::Sm90EVT<fusion::Sm90Compute<ScaleBiasAct, Out, Compute, kRound>,
                                         fusion::Sm90AccFetch, RowScale<TileShape>, ColumnScale<TileShape>,
                                         ColumnBias<Element, TileShape>>;
template <class Element, class TileShape>
using ScaleBiasActEvt = ScaleBiasActTree<Element, TileShape, Element>;

// y = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi) + R, R read through the epilogue's source (C)
template <class Element, class TileShape>
using ScaleBiasActResidualEvt =
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, Element, Compute, kRound>,
                    ScaleBiasActTree<Element, TileShape, Compute>, fusion::Sm90SrcFetch<Element>>;

// q = e4m3(y·s), amax = max |y| (the chain's final quantize_e4m3 on y of `Tree`, in Compute; s =
// *quant_scale, read once per tile; the conversion saturates at ±448)
template <class Tree>
using QuantizeE4m3Evt =
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::multiplies, cutlass::float_e4m3_t, Compute, kRound>,
                    fusion::Sm90EVT<Sm90AbsMax, Tree>, fusion::Sm90ScalarBroadcast<Compute>>;
template <class Element, class TileShape>
using ScaleBiasActE4m3Evt = QuantizeE4m3Evt<ScaleBiasActTree<Element, TileShape, Compute>>;
template <class Element, class TileShape>
using ScaleBiasActResidualE4m3Evt = QuantizeE4m3Evt<fusion::Sm90EVT<
    fusion::Sm90Compute<cutlass::plus, Compute, Compute, kRound>, ScaleBiasActTree<Element, TileShape, Compute>,
    fusion::Sm90SrcFetch<Element>>>;

// The epilogue's subtile. A Cooperative kernel that reads a source (the residual) takes subtiles
// of 128×64, so that the builder's 4 source stages hold the whole 128×256 tile and its loads run
// under the mainloop rather than after a store has freed a stage (3 mainloop stages then fit).
// NOTE: measured on the H200 (session 35, run 4, residual ladder): +1.2 % at 8192³ (739–750
// against 731–739 TFLOP/s), +1 % at 4096³, ±0.5 % at the other two shapes; the auto subtile
// (128×32, half the tile in flight) waited per tile on a store and a DRAM load.
// An e4m3 D does not share the source's stages (8-bit D, 16-bit C), so its kernels keep the auto
// subtile, whose source and output stages leave the mainloop 3 stages.
template <bool kReadsSource, Sm90Schedule kSchedule, bool kSharesSourceStages = true>
using EpilogueTileFor =
    cute::conditional_t<kReadsSource && kSharesSourceStages && kSchedule == Sm90Schedule::Cooperative,
                        Shape<_128, _64>, cutlass::epilogue::collective::EpilogueTileAuto>;

// A GEMM D[M,N] = evt(A[M,K] · B[N,K]ᵀ) with row-major A and D and K-major B; D in ElementD
// (Element, or e4m3 after a final quantize).
template <class Element, template <class, class> class EvtOf, bool kReadsSource, Sm90Schedule kSchedule,
          class ElementD = Element>
struct Kernel {
  using Output = ElementD;
  using Traits = ScheduleTraits<kSchedule>;
  using TileShape = typename Traits::TileShape;
  using ClusterShape = typename Traits::ClusterShape;
  using OutputTile = TileShape;  // the tile the epilogue writes
  using Evt = EvtOf<Element, OutputTile>;
  using ElementC = cute::conditional_t<kReadsSource, Element, void>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      EpilogueTileFor<kReadsSource, kSchedule, std::is_same_v<ElementD, Element>>, Accumulator, Compute, ElementC,
      cutlass::layout::RowMajor, kAlignment<Element>, ElementD, cutlass::layout::RowMajor, kAlignment<ElementD>,
      typename Traits::Epilogue, Evt>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlignment<Element>,
      Element, cutlass::layout::ColumnMajor, kAlignment<Element>, Accumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename Traits::Mainloop>::CollectiveOp;

  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                           cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

// A gated GEMM D[M, N/2] = pair(A[M,K] · B[N,K]ᵀ) (Pair: SwiGluPair or GeGluPair) on the
// Cooperative schedule: the mainloop's 128×256 tile holds 128 gate columns and the 128 up columns
// they pair with (B interleaved in blocks of 128 rows), and the epilogue writes a 128×128 tile
// (sm90_gated_epilogue.cuh).
template <class Element, class Pair = SwiGluPair>
struct GatedKernel {
  using Output = Element;
  using Traits = ScheduleTraits<Sm90Schedule::Cooperative>;
  using TileShape = typename Traits::TileShape;
  using ClusterShape = typename Traits::ClusterShape;
  using OutputTile = Shape<_128, _128, _64>;
  static_assert(size<1>(TileShape{}) == 2 * size<1>(OutputTile{}) && size<0>(TileShape{}) == size<0>(OutputTile{}),
                "the output tile is the mainloop tile's gate half");
  using Evt = IdentityEvt<Element, OutputTile>;
  using OutputEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, OutputTile, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, Compute, void, cutlass::layout::RowMajor,
      kAlignment<Element>, Element, cutlass::layout::RowMajor, kAlignment<Element>, typename Traits::Epilogue,
      Evt>::CollectiveOp;
  // NOTE: the Cooperative mainloop builder stacks its two consumer warpgroups along M (atom
  // layout 2×1×1); the output TiledMma keeps that and the operand majors, and halves the atom's N.
  using OutputTiledMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, Accumulator, OutputTile, GMMA::Major::K, GMMA::Major::K>(),
      Layout<Shape<_2, _1, _1>>{}));
  using Epilogue = Sm90GatedEpilogue<OutputEpilogue, OutputTiledMma, Pair>;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlignment<Element>,
      Element, cutlass::layout::ColumnMajor, kAlignment<Element>, Accumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename Traits::Mainloop>::CollectiveOp;
  static_assert(std::is_same_v<typename Mainloop::TiledMma,
                               decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, Accumulator, TileShape,
                                                                            GMMA::Major::K, GMMA::Major::K>(),
                                                       Layout<Shape<_2, _1, _1>>{}))>,
                "the output TiledMma must be the mainloop's with half the N");

  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                           cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

}  // namespace fusekit::device::sm90
