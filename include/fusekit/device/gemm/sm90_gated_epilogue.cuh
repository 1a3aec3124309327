#pragma once
// The gated Hopper epilogue: y[i, j] = act(acc[i, gate(j)]) · acc[i, up(j)] (act = silu or
// gelu_tanh: the Pair functor), stored at half the mainloop tile's width.
//
// The mainloop computes a [TILE_M, 2·TILE_N_OUT] accumulator tile whose left half holds gate
// columns and right half the matching up columns (W interleaved in blocks of TILE_N_OUT rows:
// EpilogueSpec::swiglu(TILE_N_OUT)). In a wgmma accumulator fragment one thread holds the
// columns {8g + 2·(lane%4) + v} for every n8 group g of the tile's N, so column c and column
// c + TILE_N_OUT sit in the same thread: the pairing is register-only, and the result is exactly
// the fragment a TILE_N_OUT-wide wgmma would have left. A stock CUTLASS collective epilogue built
// for the [TILE_M, TILE_N_OUT] output tile (EVT, shared-memory staging, TMA store) then runs on
// it unchanged, so nothing of the output path is reimplemented here.
//
// Sm90GatedEpilogue wraps that output epilogue and translates what the kernel hands it: the
// problem's N (2·N_out → N_out), the tile shape, the accumulators and the TiledMma that
// partitioned them. The kernel's tile coordinates already index output tiles (mainloop tile n
// writes output tile n).
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include "fusekit/device/pointwise/activation.cuh"

namespace fusekit::device::sm90 {

// y = silu(gate) · up = gate / (1 + e^(−gate)) · up
// NOTE: silu_fast: the Cooperative epilogue runs between a tile's mainloop and the next.
struct SwiGluPair {
  CUTLASS_DEVICE float operator()(float gate, float up) const { return silu_fast(gate) * up; }
};

// y = gelu_tanh(gate) · up (the hardware tanh, as the Hopper GELU epilogues: 16-bit outputs)
struct GeGluPair {
  CUTLASS_DEVICE float operator()(float gate, float up) const { return gelu_tanh_fast(gate) * up; }
};

// OutputEpilogue: a CUTLASS sm90 collective epilogue built for the output tile.
// OutputTiledMma: the mainloop's TiledMma with its atom's N halved (same threads, same atom layout).
template <class OutputEpilogue, class OutputTiledMma, class Pair>
class Sm90GatedEpilogue : public OutputEpilogue {
 public:
  using OutputEpilogue::OutputEpilogue;
  using typename OutputEpilogue::Arguments;
  using typename OutputEpilogue::LoadPipeline;
  using typename OutputEpilogue::LoadPipelineState;
  using typename OutputEpilogue::Params;
  using typename OutputEpilogue::StorePipeline;
  using typename OutputEpilogue::StorePipelineState;
  using typename OutputEpilogue::TensorStorage;

  // The accumulator problem (M, 2·N_out, K[, L]) as the output problem (M, N_out, K, L).
  template <class ProblemShape>
  CUTLASS_HOST_DEVICE static auto output_problem(ProblemShape const& problem_shape) {
    auto [m, n, k, l] = cute::append<4>(problem_shape, 1);
    return cute::make_shape(m, n / 2, k, l);
  }

  // The mainloop tile (TILE_M, 2·TILE_N_OUT, TILE_K) as the output tile.
  template <class TileShapeMNK>
  CUTLASS_HOST_DEVICE static constexpr auto output_tile(TileShapeMNK) {
    using namespace cute;
    static_assert(size<1>(TileShapeMNK{}) % 2 == 0, "the mainloop tile must hold a gate half and an up half");
    return make_shape(size<0>(TileShapeMNK{}), Int<size<1>(TileShapeMNK{}) / 2>{}, size<2>(TileShapeMNK{}));
  }

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    return OutputEpilogue::to_underlying_arguments(output_problem(problem_shape), args, workspace);
  }

  template <class ProblemShape>
  static std::size_t get_workspace_size(ProblemShape const& problem_shape, Arguments const& args) {
    return OutputEpilogue::get_workspace_size(output_problem(problem_shape), args);
  }

  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const& problem_shape, Arguments const& args,
                                              void* workspace, cudaStream_t stream,
                                              cutlass::CudaHostAdapter* cuda_adapter = nullptr) {
    return OutputEpilogue::initialize_workspace(output_problem(problem_shape), args, workspace, stream,
                                                cuda_adapter);
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    const auto n = cute::get<1>(problem_shape);
    return n % 2 == 0 && OutputEpilogue::can_implement(output_problem(problem_shape), args);
  }

  template <class TileShapeMNK>
  CUTLASS_HOST_DEVICE static constexpr int get_load_pipe_increment(TileShapeMNK tile_shape_mnk) {
    return OutputEpilogue::get_load_pipe_increment(output_tile(tile_shape_mnk));
  }

  template <class TileShapeMNK>
  CUTLASS_HOST_DEVICE static constexpr int get_store_pipe_increment(TileShapeMNK tile_shape_mnk) {
    return OutputEpilogue::get_store_pipe_increment(output_tile(tile_shape_mnk));
  }

  // The producer warp's loads of C (when the output EVT reads a source) see the output problem.
  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class TiledMma>
  CUTLASS_DEVICE auto load(LoadPipeline load_pipeline, LoadPipelineState load_pipe_producer_state,
                           ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_mnk,
                           TileCoordMNKL tile_coord_mnkl, TiledMma, int thread_idx, TensorStorage& shared_tensors,
                           int subtile_idx = -1) {
    return OutputEpilogue::load(load_pipeline, load_pipe_producer_state, output_problem(problem_shape_mnkl),
                                output_tile(tile_shape_mnk), tile_coord_mnkl, OutputTiledMma{}, thread_idx,
                                shared_tensors, subtile_idx);
  }

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                            StorePipeline store_pipeline, StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_mnk,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators, TiledMma,
                            int thread_idx, TensorStorage& shared_tensors, int subtile_idx = -1) {
    static_assert(cute::size(TiledMma{}) == cute::size(OutputTiledMma{}),
                  "the output TiledMma must keep the mainloop's threads");
    auto gated = cute::partition_fragment_C(OutputTiledMma{}, cute::take<0, 2>(output_tile(tile_shape_mnk)));
    pair_halves(accumulators, gated);
    return OutputEpilogue::store(load_pipeline, load_pipe_consumer_state, store_pipeline, store_pipe_producer_state,
                                 output_problem(problem_shape_mnkl), output_tile(tile_shape_mnk), tile_coord_mnkl,
                                 gated, OutputTiledMma{}, thread_idx, shared_tensors, subtile_idx);
  }

  // gated(v, m) = pair(acc(v, m), acc(v + half the n8 groups, m)). Both fragments are wgmma
  // accumulators: mode 0 is (column pair, row +8, n8 group), mode 1 the atoms along M, mode 2
  // the atoms along N, which must be one so that a thread holds both halves of the tile's N.
  // Host-callable so that tests/device/gemm/sm90_gated_fragment_gpu_test.cu checks it on CuTe layouts.
  template <class AccEngine, class AccLayout, class GatedEngine, class GatedLayout>
  CUTLASS_HOST_DEVICE static void pair_halves(cute::Tensor<AccEngine, AccLayout> const& acc,
                                         cute::Tensor<GatedEngine, GatedLayout>& gated) {
    using namespace cute;
    static_assert(rank<0>(AccLayout{}) == 3 && rank<0>(GatedLayout{}) == 3,
                  "wgmma accumulator fragments: (column pair, row +8, n8 group)");
    static_assert(size<2>(AccLayout{}) == 1 && size<2>(GatedLayout{}) == 1,
                  "one wgmma atom must span the mainloop tile's N so each thread holds gate and up");
    constexpr int kPairs = size<0, 0>(AccLayout{}), kRowHalves = size<0, 1>(AccLayout{});
    constexpr int kGroupsOut = size<0, 2>(GatedLayout{});
    static_assert(size<0, 2>(AccLayout{}) == 2 * kGroupsOut, "gate and up halves of equal width");
    static_assert(size<1>(AccLayout{}) == size<1>(GatedLayout{}), "the same atoms along M");
    const Pair pair{};
    CUTLASS_PRAGMA_UNROLL
    for (int m = 0; m < size<1>(AccLayout{}); ++m)
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kGroupsOut; ++g)
        CUTLASS_PRAGMA_UNROLL
        for (int r = 0; r < kRowHalves; ++r)
          CUTLASS_PRAGMA_UNROLL
          for (int v = 0; v < kPairs; ++v)
            gated(make_coord(make_coord(v, r, g), m, 0)) =
                pair(acc(make_coord(make_coord(v, r, g), m, 0)), acc(make_coord(make_coord(v, r, g + kGroupsOut), m, 0)));
  }
};

}  // namespace fusekit::device::sm90
