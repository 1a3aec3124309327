#pragma once
// An epilogue visitor node of the Hopper kernel: amax = max |x| over the matrix's elements (those
// inside M × N only: rows and columns past them hold whatever the tree made of zeros), NaN kept
// (device/amax.cuh), x passed on unchanged. Each warp reduces its values and one lane takes an
// atomic max into *amax, into the caller's value as the portable kernel does (CUTLASS's scalar
// reduction resets it at every launch, takes an atomic per thread and drops NaN). Null amax:
// nothing is reduced.
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp>

#include "fusekit/device/amax.cuh"

namespace fusekit::device::sm90 {

struct Sm90AbsMax {
  struct SharedStorage {};
  struct Arguments {
    float* amax = nullptr;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) {
    return true;
  }
  template <class ProblemShape>
  static std::size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE Sm90AbsMax() {}
  CUTLASS_HOST_DEVICE Sm90AbsMax(Params const& params, SharedStorage const&) : params(params) {}
  Params params;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const&) {
    return cutlass::epilogue::fusion::EmptyProducerLoadCallbacks{};
  }

  template <class CoordTensor, class Residue>
  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CoordTensor coords, Residue residue, float* amax)
        : coords(coords), residue(residue), amax(amax) {}
    CoordTensor coords;  // (CPY, CPY_M, CPY_N, EPI_M, EPI_N): each value's (m, n)
    Residue residue;     // the thread's bounds of (m, n)
    float* amax;
    float thread_max = 0.0f;

    template <class ElementAccumulator, class ElementInput, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementInput, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int epi_m, int epi_n,
        cutlass::Array<ElementInput, FragmentSize> const& x) {
      if (amax != nullptr) {
        auto subtile = coords(cute::_, cute::_, cute::_, epi_m, epi_n);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < FragmentSize; ++i)
          if (cute::elem_less(subtile(epi_v * FragmentSize + i), residue))
            thread_max = amax_step(thread_max, static_cast<float>(x[i]));
      }
      return x;
    }

    // Every consumer thread ends each tile here, so whole warps take part in the reduction.
    CUTLASS_DEVICE void end() {
      if (amax == nullptr) return;
      warp_atomic_amax(amax, thread_max);
    }
  };

  template <bool kReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const& args) {
    return ConsumerStoreCallbacks<decltype(args.tCcD), decltype(args.residue_tCcD)>(args.tCcD, args.residue_tCcD,
                                                                                   params.amax);
  }
};

}  // namespace fusekit::device::sm90
