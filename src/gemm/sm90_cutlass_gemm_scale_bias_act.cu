// The Hopper CUTLASS scale-bias-activation kernels, Cooperative schedule (sm_90a only):
//   D = clamp(act(α·acc·r[i]·c[j] + b[j]), lo, hi) [+ R]
#include "sm90_cutlass_launch.cuh"

namespace fusekit::sm90 {

std::size_t workspace_bytes_scale_bias_act(Chain chain, const Problem& p) {
  return launch_detail::dispatch_scale_bias_act(
      chain, p.dtype, [&]<class K, class Element>() { return launch_detail::workspace_for<K, Element>(p); });
}

void run_scale_bias_act(Chain chain, const Problem& p, void* workspace, cudaStream_t stream) {
  launch_detail::dispatch_scale_bias_act(
      chain, p.dtype, [&]<class K, class Element>() { launch_detail::launch<K, Element>(p, workspace, stream); });
}

}  // namespace fusekit::sm90
