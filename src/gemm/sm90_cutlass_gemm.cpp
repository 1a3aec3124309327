// Host dispatch of the Hopper CUTLASS kernels: which chains are compiled, and which schedule runs.
#include "sm90_cutlass_gemm.hpp"

#include "fusekit/error.hpp"

namespace fusekit::sm90 {

std::optional<Chain> match_chain(const EpilogueSpec& spec) {
  if (spec == EpilogueSpec{}) return Chain::Identity;
  if (spec == EpilogueSpec{}.bias().gelu_tanh()) return Chain::BiasGelu;
  if (spec == EpilogueSpec{}.bias().gelu_tanh().residual()) return Chain::BiasGeluResidual;
  if (spec == EpilogueSpec{}.swiglu(kSm90GateBlock)) return Chain::SwiGlu;
  return std::nullopt;
}

std::string_view schedule_blocker(Chain chain, Sm90Schedule schedule) {
  return chain == Chain::SwiGlu && schedule == Sm90Schedule::Pingpong ? kGatedScheduleOnly : std::string_view{};
}

std::size_t workspace_bytes(Chain chain, Sm90Schedule schedule, const Problem& p) {
  return schedule == Sm90Schedule::Cooperative ? workspace_bytes_cooperative(chain, p)
                                               : workspace_bytes_pingpong(chain, p);
}

void run(Chain chain, Sm90Schedule schedule, const Problem& p, void* workspace, cudaStream_t stream) {
  if (schedule == Sm90Schedule::Cooperative)
    run_cooperative(chain, p, workspace, stream);
  else
    run_pingpong(chain, p, workspace, stream);
}

}  // namespace fusekit::sm90
