#pragma once
// Tile sizes, thread roles and shared-memory layouts of the Hopper attention forward kernel, per
// head dim. Register arithmetic behind the choices (per consumer thread, fp32 unless noted; a
// warpgroup's 64×N wgmma accumulator is N/2 registers per thread):
//   S tile 64×kBlockN → kBlockN/2,  P (16-bit, two per register) → kBlockN/4,  O 64×D → D/2.
//   D =  64, kBlockN = 128: 64 + 32 + 32 = 128 (+ addresses, row statistics) of 240.
//   D = 128, kBlockN = 128: 64 + 32 + 64 = 160 of 240. 128 query rows per warpgroup would need
//            S and O twice over (320): too many, so each warpgroup owns 64 rows and the CTA 128.
//   D = 256, kBlockN =  64: 32 + 16 + 128 = 176 of 240. 80 keys spilled 4 bytes (ptxas,
//            2026-11-29).
// Shared memory (of the 227 KB a CTA may take) holds Q and kStages × (K + V); a deeper K/V
// pipeline buys lead time for the loads (an L2 hit of a 32 KB TMA tile takes about one key
// tile's GEMMs at D = 128):
//   D =  64, kBlockN = 128: Q 16 KB + 4 stages × 2 × 16 KB = 144 KB.
//   D = 128, kBlockN = 128: Q 32 KB + 3 stages × 2 × 32 KB = 224 KB (masked calls), or
//            2 stages: 160 KB (unmasked calls; sm90_flash_forward_launch.cuh says why).
//   D = 256, kBlockN =  64: Q 64 KB + 2 stages × 2 × 32 KB = 192 KB (3 stages: 256 KB).
// and, where it fits, one warpgroup's O tile for the TMA store (OutputPath below): 8 KB at D = 64,
// 16 KB at D = 128 with 2 stages (176 KB in all); none at D = 128 with 3 stages, and none at
// D = 256 (registers, not shared memory, rule it out there).
#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>
#include <cutlass/gemm/collective/builders/sm90_common.inl>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <cstddef>
#include <cstdint>

#include "fusekit/device/attention/attention_params.hpp"

namespace fusekit::device::attention::sm90 {

using namespace cute;

inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kWgmmaRows = 64;     // rows of one warpgroup's wgmma tile
inline constexpr int kConsumers = 2;      // consumer warpgroups, pingponging
inline constexpr int kWarpgroups = 1 + kConsumers;  // + the producer
inline constexpr int kThreads = kWarpgroups * kWarpgroupThreads;
inline constexpr int kBlockM = kConsumers * kWgmmaRows;  // query rows per CTA tile
static_assert(kBlockM == kSm90BlockM, "the host counts tiles with kSm90BlockM");
// setmaxnreg: 128 × (24 + 2 × 240) = 64512 of the SM's 65536 registers. The producer only
// issues TMA (loads from one warp, O's stores from another); the consumers hold S, P and O (see
// the arithmetic above).
inline constexpr int kProducerRegisters = 24;
inline constexpr int kConsumerRegisters = 240;
inline constexpr int kRegisterFile = 64 * 1024;  // 32-bit registers per SM
static_assert(kWarpgroupThreads * (kProducerRegisters + kConsumers * kConsumerRegisters) <= kRegisterFile,
              "register split exceeds the register file");
// No thread-block clusters: each CTA loads its own K and V (multicast across a cluster is a
// later experiment).
using ClusterShape = Shape<_1, _1, _1>;

// Keys per tile and K/V shared-memory stages per head dim (the arithmetic above).
template <int kHeadDim> struct Sm90KeyTiling;
template <> struct Sm90KeyTiling<64> { static constexpr int kBlockN = 128, kStages = 4; };
template <> struct Sm90KeyTiling<128> { static constexpr int kBlockN = 128, kStages = 3; };
template <> struct Sm90KeyTiling<256> { static constexpr int kBlockN = 64, kStages = 2; };

// The largest dynamic shared memory a CTA may opt into on sm_90.
inline constexpr std::size_t kSmemCapacity = 227 * 1024;
// Shared memory past the tiles: the barriers, rounded up to the tiles' 1024-byte alignment.
inline constexpr std::size_t kBarrierBytes = 1024;

// How O leaves the CTA. SharedTma: a warpgroup writes its 64 rows into a shared-memory tile with
// stmatrix and a storer warp sends the tile out with one TMA store (ncu, 2026-12-01, D = 128,
// S = 4096: the Registers epilogue's 32 four-byte stores per thread took 4.2 % of the consumers'
// time, throttled by the store queue). Registers: each thread stores its accumulator pairs, for
// shapes whose shared memory has no room left for the tile.
enum class OutputPath : std::uint8_t { Registers, SharedTma };
inline constexpr int kStagedHeadDimMax = 128;  // the widest O that SharedTma takes (see kOutput)

// Everything the kernel's parts derive from one head dim's tiling. T is cutlass::bfloat16_t or
// cutlass::half_t.
template <class T, int kHeadDim_, int kBlockN_ = Sm90KeyTiling<kHeadDim_>::kBlockN,
          int kStages_ = Sm90KeyTiling<kHeadDim_>::kStages>
struct Sm90ForwardShape {
  using Element = T;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  using BlockM = Int<kBlockM>;
  using BlockN = Int<kBlockN>;
  using HeadDim = Int<kHeadDim>;
  using Stages = Int<kStages>;

  // Q, K and V tiles are stored as TMA writes them: rows of D contiguous elements, 128-byte
  // swizzled. S = Q·Kᵀ reads Q and K K-major (along D).
  using SmemAtom = decltype(cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, T, BlockM, HeadDim>());
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<BlockM, HeadDim>{}));
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<BlockN, HeadDim, Stages>{}));
  using SmemLayoutKVStage = decltype(tile_to_shape(SmemAtom{}, Shape<BlockN, HeadDim>{}));  // one TMA tile
  // O += P·V reads V as the B operand of shape (D, keys): the same bytes seen transposed, which is
  // the MN-major (D contiguous) operand layout wgmma takes for 16-bit types.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_layout(Shape<HeadDim, BlockN, Stages>{},
                                  Stride<BlockN, _1, Int<kBlockN * kHeadDim>>{})));

  // Both consumer warpgroups in one tiled MMA: warpgroup w owns rows [64w, 64w + 64).
  using AtomLayout = Layout<Shape<Int<kConsumers>, _1, _1>>;
  // S = Q·Kᵀ: one wgmma per 16-wide k-step covering all kBlockN keys, so that Q is read from
  // shared memory once per k-step.
  using TiledMmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<T, T, float, Shape<Int<kWgmmaRows>, BlockN, HeadDim>>(), AtomLayout{}));
  using TiledMmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<Int<kWgmmaRows>, HeadDim, BlockN>, GMMA::Major::K, GMMA::Major::MN>(),
      AtomLayout{}));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  static constexpr std::uint32_t kTileBytesQ = kBlockM * kHeadDim * sizeof(T);
  static constexpr std::uint32_t kTileBytesKV = kBlockN * kHeadDim * sizeof(T);

  // One warpgroup's O tile, as the TMA store reads it: 64 rows of D contiguous elements,
  // 128-byte swizzled (the warpgroups take turns with the one tile; sm90_epilogue.cuh).
  using SmemLayoutO = decltype(tile_to_shape(
      cutlass::gemm::collective::detail::ss_smem_selector<GMMA::Major::K, T, Int<kWgmmaRows>, HeadDim>(),
      Shape<Int<kWgmmaRows>, HeadDim>{}));
  // The stmatrix view of one warpgroup's accumulators (the O tile's writer).
  using TiledMmaPVWarpgroup = decltype(make_tiled_mma(
      GMMA::rs_op_selector<T, T, float, Shape<Int<kWgmmaRows>, HeadDim, BlockN>, GMMA::Major::K, GMMA::Major::MN>()));
  static constexpr std::size_t kTileBytesO = kWgmmaRows * kHeadDim * sizeof(T);
  static constexpr std::size_t kMainloopBytes = (kBlockM + 2 * kStages * kBlockN) * kHeadDim * sizeof(T);
  // NOTE: D = 256 keeps Registers: its consumers hold O in 128 registers, and the stmatrix
  // addresses on top of them spilled 12 bytes (ptxas, 2026-12-01).
  static constexpr OutputPath kOutput =
      kMainloopBytes + kTileBytesO + kBarrierBytes <= kSmemCapacity && kHeadDim <= kStagedHeadDimMax
          ? OutputPath::SharedTma
          : OutputPath::Registers;
};

}  // namespace fusekit::device::attention::sm90
