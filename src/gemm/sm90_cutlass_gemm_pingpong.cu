// The Hopper CUTLASS kernels with the Pingpong schedule (sm_90a only).
#include "sm90_cutlass_launch.cuh"

namespace fusekit::sm90 {

std::size_t workspace_bytes_pingpong(Chain chain, const Problem& p) {
  return launch_detail::workspace_bytes<Sm90Schedule::Pingpong>(chain, p);
}

void run_pingpong(Chain chain, const Problem& p, void* workspace, cudaStream_t stream) {
  launch_detail::run<Sm90Schedule::Pingpong>(chain, p, workspace, stream);
}

}  // namespace fusekit::sm90
