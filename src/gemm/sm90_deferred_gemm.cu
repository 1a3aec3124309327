// Launch of the Hopper GEMM with a deferred epilogue (include/fusekit/device/gemm/sm90_deferred_gemm.cuh),
// compiled for sm_90a only: the bias → GELU chains, with and without a residual, in bf16 and f16.
#include <cutlass/device_kernel.h>
#include <cutlass/kernel_hardware_info.h>

#include <string>

#include "fusekit/device/gemm/sm90_deferred_gemm.cuh"
#include "sm90_cutlass_launch.cuh"

namespace fusekit::sm90 {
namespace {

using device::sm90::DeferredChain;
using device::sm90::DeferredGemm;
// Auto's tile count (sm90_cutlass_gemm.hpp) counts this kernel's tiles.
static_assert(DeferredGemm<cutlass::bfloat16_t, DeferredChain::BiasGeluResidual>::kTileM == kDeferredTileM &&
              DeferredGemm<cutlass::bfloat16_t, DeferredChain::BiasGeluResidual>::kTileN == kDeferredTileN);

template <class K>
void launch(const Problem& p, cudaStream_t stream) {
  using Element = typename K::ElementType;
  using Mainloop = typename K::Mainloop;
  const typename K::ProblemShape problem{static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), 1};
  const typename Mainloop::Arguments operands{
      static_cast<const Element*>(p.a), {p.lda, cute::_1{}, p.lda * p.m},
      static_cast<const Element*>(p.b), {p.ldb, cute::_1{}, p.ldb * p.n}};
  if (!Mainloop::can_implement(problem, operands))
    throw Error(ErrorKind::Unsupported, "Hopper deferred-epilogue kernel: A or B is not aligned for TMA");

  const cutlass::KernelHardwareInfo hw = launch_detail::current_hardware();
  typename K::Scheduler::Arguments order;
  order.max_swizzle_size = launch_detail::kSchedulerSwizzle;  // the Cooperative kernel's tile order
  const auto problem_mnkl = cute::append<4>(problem, 1);

  typename K::Params params{
      problem,
      Mainloop::to_underlying_arguments(problem, operands, nullptr),
      K::Scheduler::to_underlying_arguments(problem_mnkl, typename K::TileShape{}, typename K::ClusterShape{}, hw, order),
      cute::make_tma_copy(cute::SM90_TMA_STORE{},
                          cute::make_tensor(cute::make_gmem_ptr(static_cast<Element*>(p.d)),
                                            cute::make_shape(static_cast<int>(p.m), static_cast<int>(p.n)),
                                            typename K::StrideD{p.ldd, cute::_1{}}),
                          typename K::SmemLayoutBlock{}),
      static_cast<const Element*>(p.bias),
      static_cast<const Element*>(p.residual),
      p.ldr};
  const dim3 grid = K::Scheduler::get_grid_shape(params.scheduler, problem_mnkl, typename K::TileShape{},
                                                 typename K::ClusterShape{}, hw, order);

  const auto kernel = &cutlass::device_kernel<K>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, K::SharedStorageSize),
             "Hopper deferred-epilogue kernel: shared memory attribute");
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = cute::size<0>(typename K::ClusterShape{});
  cluster.val.clusterDim.y = cute::size<1>(typename K::ClusterShape{});
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(K::MaxThreadsPerBlock);
  config.dynamicSmemBytes = K::SharedStorageSize;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, params), "Hopper deferred-epilogue kernel launch");
  check_launch("sm90 deferred-epilogue GEMM");
}

}  // namespace

void run_deferred(Chain chain, const Problem& p, cudaStream_t stream) {
  launch_detail::for_dtype(p.dtype, [&]<class Element>() {
    if (chain == Chain::BiasGelu) return launch<DeferredGemm<Element, DeferredChain::BiasGelu>>(p, stream);
    if (chain == Chain::BiasGeluResidual)
      return launch<DeferredGemm<Element, DeferredChain::BiasGeluResidual>>(p, stream);
    throw Error(ErrorKind::Unsupported, std::string(kDeferredChainsOnly));
  });
}

}  // namespace fusekit::sm90
