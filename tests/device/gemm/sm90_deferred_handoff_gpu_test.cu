// Host-side checks of the hand-over the Hopper deferred-epilogue GEMM relies on (CuTe layouts are
// host code; no GPU needed): the consumers' stores put each accumulator value where the TiledMma
// says it belongs, every value of the tile exactly once, and the TMA store's 128×64 blocks read
// the same shared-memory bytes the consumers wrote and the epilogue warps rewrote.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fusekit/device/gemm/sm90_deferred_gemm.cuh"

namespace fusekit {
namespace {

using namespace cute;

template <class Kernel>
void expect_stores_follow_the_accumulator_layout() {
  using TiledMma = typename Kernel::TiledMma;
  const auto tile = take<0, 2>(typename Kernel::TileShape{});
  const auto identity = make_identity_tensor(tile);
  const auto tiled_store = Kernel::hand_store();
  std::vector<int> seen(Kernel::kTileM * Kernel::kTileN, 0);
  for (int t = 0; t < size(TiledMma{}); ++t) {
    auto thread_store = tiled_store.get_slice(t);
    // Value i of the consumer's x comes from accumulator value i in the store's order…
    Tensor from = thread_store.retile_S(TiledMma{}.get_slice(t).partition_C(identity));
    // …and the store writes x's value i to this coordinate of H.
    Tensor to = thread_store.partition_S(identity);
    ASSERT_EQ(size(from), size(to));
    for (int i = 0; i < size(to); ++i) {
      const int row = get<0>(to(i)), col = get<1>(to(i));
      ASSERT_EQ(get<0>(from(i)), row) << "thread " << t << " value " << i;
      ASSERT_EQ(get<1>(from(i)), col) << "thread " << t << " value " << i;
      ++seen[row * Kernel::kTileN + col];
    }
  }
  for (int i = 0; i < static_cast<int>(seen.size()); ++i)
    ASSERT_EQ(seen[i], 1) << "tile element (" << i / Kernel::kTileN << ", " << i % Kernel::kTileN << ")";
}

template <class Kernel>
void expect_blocks_are_the_tiles_columns() {
  using Element = typename Kernel::ElementType;
  // The swizzle acts on shared-memory address bits: lay both views over one buffer aligned to its period.
  alignas(Kernel::kSwizzlePeriodBytes) static Element buffer[Kernel::kTileM * Kernel::kTileN];
  Tensor tile = make_tensor(make_smem_ptr(buffer), typename Kernel::SmemLayoutTile{});
  for (int block = 0; block < Kernel::kBlocks; ++block) {
    Tensor b = make_tensor(make_smem_ptr(buffer + block * Kernel::kBlockElements), typename Kernel::SmemLayoutBlock{});
    for (int row = 0; row < Kernel::kTileM; ++row)
      for (int col = 0; col < Kernel::kBlockN; ++col)
        ASSERT_EQ(&tile(row, block * Kernel::kBlockN + col), &b(row, col))
            << "block " << block << " (" << row << ", " << col << ")";
  }
  // The epilogue warps read and write H in 16-byte chunks: a chunk's values are consecutive bytes…
  for (int row = 0; row < Kernel::kTileM; ++row)
    for (int col = 0; col < Kernel::kTileN; col += Kernel::kChunk)
      for (int v = 1; v < Kernel::kChunk; ++v) ASSERT_EQ(&tile(row, col + v), &tile(row, col) + v);
  // …and find chunk c of a block by its written-out swizzle, not by the layout.
  const auto* base = reinterpret_cast<const char*>(buffer);
  for (int block = 0; block < Kernel::kBlocks; ++block)
    for (uint32_t c = 0; c < Kernel::kTileM * Kernel::kChunksPerBlockRow; ++c) {
      const int row = static_cast<int>(c / Kernel::kChunksPerBlockRow);
      const int col = block * Kernel::kBlockN + static_cast<int>(c % Kernel::kChunksPerBlockRow) * Kernel::kChunk;
      ASSERT_EQ(reinterpret_cast<const char*>(&tile(row, col)) - base,
                block * Kernel::kBlockBytes + static_cast<std::ptrdiff_t>(Kernel::swizzled_chunk_offset(c)))
          << "block " << block << " chunk " << c;
    }
}

using Bf16Residual =
    device::sm90::DeferredGemm<cutlass::bfloat16_t, device::sm90::DeferredChain::BiasGeluResidual>;
using F16 = device::sm90::DeferredGemm<cutlass::half_t, device::sm90::DeferredChain::BiasGelu>;

TEST(Sm90DeferredHandOff, ConsumerStoresFollowTheAccumulatorLayout) {
  expect_stores_follow_the_accumulator_layout<Bf16Residual>();
  expect_stores_follow_the_accumulator_layout<F16>();
}

TEST(Sm90DeferredHandOff, TmaStoreBlocksAreTheTilesColumnBlocks) {
  expect_blocks_are_the_tiles_columns<Bf16Residual>();
  expect_blocks_are_the_tiles_columns<F16>();
}

}  // namespace
}  // namespace fusekit
