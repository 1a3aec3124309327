// Host-side check of the register pairing the Hopper gated GEMM relies on (CuTe layouts are host
// code; no GPU needed): for every consumer thread, Sm90GatedEpilogue::pair_halves gives output
// value i the mainloop accumulator at (row, col) and (row, col + 128), where (row, col) is what
// the 128-column output TiledMma says value i of that thread holds. With W interleaved in
// 128-row blocks that is gate column 256n + col and up column 256n + 128 + col for output column
// 128n + col: EpilogueSpec::swiglu(128).
#include <gtest/gtest.h>

#include "fusekit/device/gemm/sm90_cutlass_kernel.cuh"

namespace fusekit {
namespace {

using namespace cute;
using Kernel = device::sm90::GatedKernel<cutlass::bfloat16_t>;
using MainloopMma = typename Kernel::Mainloop::TiledMma;
using OutputMma = typename Kernel::OutputTiledMma;

// Which operand of the pair reaches the output, so each side is checked on its own.
struct TakeGate {
  CUTLASS_HOST_DEVICE float operator()(float gate, float) const { return gate; }
};
struct TakeUp {
  CUTLASS_HOST_DEVICE float operator()(float, float up) const { return up; }
};
template <class Pair>
using Gated = device::sm90::Sm90GatedEpilogue<typename Kernel::OutputEpilogue, OutputMma, Pair>;

constexpr int kAccCols = size<1>(typename Kernel::TileShape{});
constexpr int kOutCols = size<1>(typename Kernel::OutputTile{});

// A cell's (row, col) as an exactly representable float (128 · 256 < 2^24).
float encode(int row, int col) { return static_cast<float>(row * kAccCols + col); }

TEST(Sm90GatedFragments, EachOutputValuePairsColumnWithColumnHalfATileRight) {
  static_assert(kOutCols == kSm90GateBlock && kAccCols == 2 * kOutCols);
  const auto acc_tile = take<0, 2>(typename Kernel::TileShape{});
  const auto out_tile = take<0, 2>(typename Kernel::OutputTile{});
  ASSERT_EQ(size(MainloopMma{}), size(OutputMma{}));
  for (int t = 0; t < size(MainloopMma{}); ++t) {
    const auto acc_cells = MainloopMma{}.get_thread_slice(t).partition_C(make_identity_tensor(acc_tile));
    const auto out_cells = OutputMma{}.get_thread_slice(t).partition_C(make_identity_tensor(out_tile));
    auto acc = partition_fragment_C(MainloopMma{}, acc_tile);
    ASSERT_EQ(size(acc), 2 * size(out_cells));
    for (int i = 0; i < size(acc); ++i) acc(i) = encode(get<0>(acc_cells(i)), get<1>(acc_cells(i)));
    auto gate = partition_fragment_C(OutputMma{}, out_tile);
    auto up = partition_fragment_C(OutputMma{}, out_tile);
    Gated<TakeGate>::pair_halves(acc, gate);
    Gated<TakeUp>::pair_halves(acc, up);
    for (int i = 0; i < size(out_cells); ++i) {
      const int row = get<0>(out_cells(i)), col = get<1>(out_cells(i));
      ASSERT_EQ(gate(i), encode(row, col)) << "gate, thread " << t << " value " << i;
      ASSERT_EQ(up(i), encode(row, col + kOutCols)) << "up, thread " << t << " value " << i;
    }
  }
}

}  // namespace
}  // namespace fusekit
