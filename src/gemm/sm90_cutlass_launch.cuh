#pragma once
// Launch of the Hopper CUTLASS kernels (include/fusekit/device/gemm/); included by one sm90_*.cu
// file per schedule and one for the scale-bias-activation kernels, each compiled for sm_90a only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "fusekit/device/gemm/sm90_cutlass_kernel.cuh"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "sm90_cutlass_gemm.hpp"

namespace fusekit::sm90::launch_detail {

using namespace fusekit::device::sm90;

inline constexpr int kSchedulerSwizzle = 8;

template <class Element, Sm90Schedule kSchedule>
using IdentityKernel = Kernel<Element, IdentityEvt, false, kSchedule>;
template <class Element, Sm90Schedule kSchedule>
using BiasGeluKernel = Kernel<Element, BiasGeluEvt, false, kSchedule>;
template <class Element, Sm90Schedule kSchedule>
using BiasGeluResidualKernel = Kernel<Element, BiasGeluResidualEvt, true, kSchedule>;
template <class Element>
using ScaleBiasActKernel = Kernel<Element, ScaleBiasActEvt, false, Sm90Schedule::Cooperative>;
template <class Element>
using ScaleBiasActResidualKernel = Kernel<Element, ScaleBiasActResidualEvt, true, Sm90Schedule::Cooperative>;
template <class Element>
using ScaleBiasActE4m3Kernel =
    Kernel<Element, ScaleBiasActE4m3Evt, false, Sm90Schedule::Cooperative, cutlass::float_e4m3_t>;
template <class Element>
using ScaleBiasActResidualE4m3Kernel =
    Kernel<Element, ScaleBiasActResidualE4m3Evt, true, Sm90Schedule::Cooperative, cutlass::float_e4m3_t>;
static_assert(size<1>(GatedKernel<cutlass::bfloat16_t>::OutputTile{}) == kSm90GateBlock,
              "the public gate block is the gated kernel's output tile width");

template <class Element, class TileShape>
auto bias_args(const Problem& p) {
  return typename ColumnBias<Element, TileShape>::Arguments{static_cast<const Element*>(p.bias), Element(0),
                                                            {_0{}, _1{}, int64_t{0}}};
}

// The scale-bias-activation tree's arguments: absent scales read as 1, an absent bias as 0.
template <class Element, class TileShape>
auto scale_bias_act_args(const Problem& p) {
  return typename ScaleBiasActTree<Element, TileShape, Compute>::Arguments{
      {},
      {p.row_scale, 1.0f, {_1{}, _0{}, int64_t{0}}},
      {p.col_scale, 1.0f, {_0{}, _1{}, int64_t{0}}},
      bias_args<Element, TileShape>(p),
      p.act};
}

// The persistent grid is sized to the current device's SMs (cached per device by the runtime),
// not device 0's: the two differ on a host with mixed GPUs.
inline cutlass::KernelHardwareInfo current_hardware() {
  const DeviceInfo& info = current_device_info();
  cutlass::KernelHardwareInfo hw;
  hw.device_id = info.index;
  hw.sm_count = info.sm_count;
  return hw;
}

template <class K, class Element>
typename K::Gemm::Arguments make_arguments(const Problem& p) {
  using GemmKernel = typename K::GemmKernel;
  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC;
  using StrideD = typename GemmKernel::StrideD;
  const cutlass::KernelHardwareInfo hw = current_hardware();

  const StrideA sa{p.lda, _1{}, p.lda * p.m};
  const StrideB sb{p.ldb, _1{}, p.ldb * p.n};
  const StrideD sd{p.ldd, _1{}, p.ldd * p.m};
  const StrideC sc{p.ldr, _1{}, p.ldr * p.m};
  // NOTE: the EVT runs on the tile the epilogue writes (half the mainloop's for a gated kernel),
  // and D's stride is the output's (N/2 columns for a gated kernel).
  using TileShape = typename K::OutputTile;
  typename K::Epilogue::Arguments epilogue{};
  if constexpr (std::is_same_v<typename K::Evt, IdentityEvt<Element, TileShape>>) {
    epilogue = {{}, nullptr, sc, static_cast<Element*>(p.d), sd};
  } else if constexpr (std::is_same_v<typename K::Evt, BiasGeluEvt<Element, TileShape>>) {
    epilogue = {{{{}, bias_args<Element, TileShape>(p), {}}, {}}, nullptr, sc, static_cast<Element*>(p.d), sd};
  } else if constexpr (std::is_same_v<typename K::Evt, ScaleBiasActEvt<Element, TileShape>>) {
    epilogue = {scale_bias_act_args<Element, TileShape>(p), nullptr, sc, static_cast<Element*>(p.d), sd};
  } else if constexpr (std::is_same_v<typename K::Evt, ScaleBiasActResidualEvt<Element, TileShape>>) {
    epilogue = {{scale_bias_act_args<Element, TileShape>(p), {}, {}}, static_cast<const Element*>(p.residual), sc,
                static_cast<Element*>(p.d), sd};
  } else if constexpr (std::is_same_v<typename K::Evt, ScaleBiasActE4m3Evt<Element, TileShape>>) {
    epilogue = {{{scale_bias_act_args<Element, TileShape>(p), {p.amax}}, {{1.0f}, {p.quant_scale}}, {}},
                nullptr, sc, static_cast<typename K::Output*>(p.d), sd};
  } else if constexpr (std::is_same_v<typename K::Evt, ScaleBiasActResidualE4m3Evt<Element, TileShape>>) {
    epilogue = {{{{scale_bias_act_args<Element, TileShape>(p), {}, {}}, {p.amax}}, {{1.0f}, {p.quant_scale}}, {}},
                static_cast<const Element*>(p.residual), sc, static_cast<typename K::Output*>(p.d), sd};
  } else {
    static_assert(std::is_same_v<typename K::Evt, BiasGeluResidualEvt<Element, TileShape>>, "an EVT of this file");
    epilogue = {{{{{}, bias_args<Element, TileShape>(p), {}}, {}}, {}, {}},
                static_cast<const Element*>(p.residual), sc, static_cast<Element*>(p.d), sd};
  }
  typename K::Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                   {static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), 1},
                                   {static_cast<const Element*>(p.a), sa, static_cast<const Element*>(p.b), sb},
                                   epilogue,
                                   hw};
  // NOTE: the persistent scheduler walks tiles in swizzled groups so that CTAs running at the
  // same time share A and B tiles in L2. With CUTLASS's default of 1 (no swizzle) `fusekit
  // verify` measured 166 MiB of DRAM reads at 4096³ against cuBLASLt's 142 MiB.
  args.scheduler.max_swizzle_size = kSchedulerSwizzle;
  return args;
}

template <class K, class Element>
std::size_t workspace_for(const Problem& p) {
  return K::Gemm::get_workspace_size(make_arguments<K, Element>(p));
}

template <class K, class Element>
void launch(const Problem& p, void* workspace, cudaStream_t stream) {
  typename K::Gemm gemm;
  const auto args = make_arguments<K, Element>(p);
  cutlass::Status st = gemm.can_implement(args);
  if (st != cutlass::Status::kSuccess)
    throw Error(ErrorKind::Unsupported,
                std::string("Hopper CUTLASS kernel cannot implement this problem: ") + cutlassGetStatusString(st));
  st = gemm.initialize(args, workspace, stream);
  if (st != cutlass::Status::kSuccess)
    throw Error(ErrorKind::Cuda, std::string("CUTLASS initialize: ") + cutlassGetStatusString(st));
  st = gemm.run(stream);
  if (st != cutlass::Status::kSuccess)
    throw Error(ErrorKind::Cuda, std::string("CUTLASS run: ") + cutlassGetStatusString(st));
  check_launch("sm90 CUTLASS GEMM");
}

// Calls by_element.template operator()<Element>() for the CUTLASS element type of `dtype`.
template <class F>
auto for_dtype(DType dtype, F&& by_element) {
  switch (dtype) {
    case DType::BF16: return by_element.template operator()<cutlass::bfloat16_t>();
    case DType::F16: return by_element.template operator()<cutlass::half_t>();
    default: throw_invalid("a dtype", "bf16 or f16 for the Hopper kernel", dtype_name(dtype));
  }
}

// Calls f.template operator()<Kernel, Element>() for the instantiation that runs (chain, dtype).
template <Sm90Schedule kSchedule, class F>
auto dispatch(Chain chain, DType dtype, F&& f) {
  return for_dtype(dtype, [&]<class Element>() {
    switch (chain) {
      case Chain::Identity: return f.template operator()<IdentityKernel<Element, kSchedule>, Element>();
      case Chain::BiasGelu: return f.template operator()<BiasGeluKernel<Element, kSchedule>, Element>();
      case Chain::BiasGeluResidual:
        return f.template operator()<BiasGeluResidualKernel<Element, kSchedule>, Element>();
      case Chain::SwiGlu:
      case Chain::GeGlu:
        if constexpr (kSchedule == Sm90Schedule::Cooperative) {
          if (chain == Chain::GeGlu) return f.template operator()<GatedKernel<Element, GeGluPair>, Element>();
          return f.template operator()<GatedKernel<Element, SwiGluPair>, Element>();
        } else {
          throw Error(ErrorKind::Unsupported, std::string(kGatedScheduleOnly));
        }
      case Chain::ScaleBiasAct:
      case Chain::ScaleBiasActResidual:
      case Chain::ScaleBiasActE4m3:
      case Chain::ScaleBiasActResidualE4m3: break;  // dispatch_scale_bias_act's, in their own file
    }
    throw Error(ErrorKind::Unsupported, "no kernel of this file for the Hopper epilogue chain");
  });
}

// dispatch for the scale-bias-activation kernels (Cooperative only).
template <class F>
auto dispatch_scale_bias_act(Chain chain, DType dtype, F&& f) {
  return for_dtype(dtype, [&]<class Element>() {
    if (chain == Chain::ScaleBiasActResidual)
      return f.template operator()<ScaleBiasActResidualKernel<Element>, Element>();
    if (chain == Chain::ScaleBiasAct) return f.template operator()<ScaleBiasActKernel<Element>, Element>();
    if (chain == Chain::ScaleBiasActE4m3) return f.template operator()<ScaleBiasActE4m3Kernel<Element>, Element>();
    if (chain == Chain::ScaleBiasActResidualE4m3)
      return f.template operator()<ScaleBiasActResidualE4m3Kernel<Element>, Element>();
    throw Error(ErrorKind::Unsupported, "not a scale-bias-activation chain");
  });
}

template <Sm90Schedule kSchedule>
std::size_t workspace_bytes(Chain chain, const Problem& p) {
  return dispatch<kSchedule>(chain, p.dtype,
                             [&]<class K, class Element>() { return workspace_for<K, Element>(p); });
}

template <Sm90Schedule kSchedule>
void run(Chain chain, const Problem& p, void* workspace, cudaStream_t stream) {
  dispatch<kSchedule>(chain, p.dtype, [&]<class K, class Element>() { launch<K, Element>(p, workspace, stream); });
}

}  // namespace fusekit::sm90::launch_detail
