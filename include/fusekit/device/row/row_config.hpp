#pragma once
// How the row kernels (norms, softmax) lay a row over threads. Pure constexpr C++: the host
// planner and the device kernels read the same rules.
//
// A row (or, in a thread-block cluster, one CTA's slice of it) is held in registers: each of the
// row's threads owns up to kChunks 16-byte vectors, so x is read from memory once. The number of
// threads per row is chosen at run time from the row length, so every thread is (nearly) full:
// a row of 1024 chunks gets 256 threads of 4 chunks, not a 512-thread layout half idle. Short
// rows share a warp (sub-warp groups of 1 … 16 lanes) and several rows share a CTA; rows longer
// than one 1024-thread CTA holds are split over a cluster of CTAs whose partial sums meet in
// distributed shared memory (sm_90+). The row is still read once. The forward kernels stage long
// rows in shared memory instead (Residence::Shared, device/row/shared_row_tile.cuh), or the norms
// read them twice, the second time from L2 (Residence::Reread, device/row/reread_row_tile.cuh).
//
// NOTE: measured on the H200 (docs/performance.md), at 64 registers and one row group per CTA
// (3.1 TB/s on 4096-long bf16 rows): staging later rows in a shared-memory ring with cp.async
// (persistent CTAs, or batches of rows per CTA) was slower at every depth, and prefetching the
// next wave's rows to L2 changed nothing, so the rows' bytes in flight are not what limits it.
#include <algorithm>
#include <cstdint>

namespace fusekit::device {

inline constexpr int kWarpThreads = 32;
inline constexpr unsigned kFullWarpMask = 0xFFFFFFFFu;  // every lane of a warp
inline constexpr int kChunkBytes = 16;      // one 128-bit load or store per chunk
inline constexpr int kMaxRowThreads = 1024;  // the CTA size limit
inline constexpr int kMinBlockThreads = 128;  // short rows are packed into CTAs of at least this
inline constexpr int kMaxClusterCtas = 8;    // the portable cluster size limit
inline constexpr int kMaxNonPortableClusterCtas = 16;  // sm_90's limit, opted into per kernel
// NOTE: rows that need more threads than this split over a cluster of CTAs first (up to
// kMaxClusterCtas), and grow CTAs to kMaxRowThreads only beyond: two CTAs of 512 threads per SM
// overlap one's reduction with the other's loads. Measured (docs/performance.md): 32768–131072
// long rows gain up to 16% (RMSNorm) and 18% (softmax) over 1024-thread CTAs; a 256 cap lost 19%
// at 16384 (RMSNorm).
inline constexpr int kPreferredRowThreads = 512;

// NOTE: the kernels are compiled for CTAs of up to kMaxThreads threads; at kMaxRowThreads that
// caps them at 64 registers per thread, so 1024 threads per SM stay resident whatever the layout
// (8 CTAs of 128 threads on a 4096-long bf16 row). At 113–139 registers (the earlier fixed
// layouts) only 512 were, and the kernels reached 52% of DRAM bandwidth (docs/performance.md).
template <int kChunks_, int kMaxThreads_ = kMaxRowThreads, int kMinCtas_ = 1, int kMaxCluster_ = kMaxClusterCtas>
struct RowConfig {
  static constexpr int kChunks = kChunks_;  // 16-byte vectors per thread (per tensor held)
  static constexpr int kMaxThreads = kMaxThreads_;
  static constexpr int kMinCtas = kMinCtas_;  // CTAs of kMaxThreads resident per SM (register cap)
  static constexpr int kMaxCluster = kMaxCluster_;  // CTAs per row at most, where the GPU allows
  static constexpr int kCapacity = kMaxThreads * kChunks;  // chunks one CTA holds
  static_assert(kMaxThreads % kWarpThreads == 0 && kMaxThreads <= kMaxRowThreads, "whole warps, one CTA");
};

// Ops that hold one tensor of the row (norm and softmax forward): 16 data registers per thread.
using OneTensorRows = RowConfig<4>;
// LayerNorm (no residual) on whole rows of at most ShortRows::kMaxThreads threads (up to 4096
// 16-bit columns): CTAs of at most 128 threads, five per SM, so up to 102 registers (80 taken
// for 16-bit types): the weight and bias of all the thread's chunks load before the first use.
// NOTE: measured on the H200 (session 14, 32768×4096 bf16): LayerNorm 3.90 → 4.05 TB/s against
// the 64-register kernel; add+RMSNorm lost there (4.05 → 3.89, f32 at 2048 columns 4.08 → 3.92)
// and RMSNorm gained nothing (stand-alone), so they keep OneTensorRows.
using ShortRows = RowConfig<4, 128, 5>;
// Ops that hold two tensors of the row (the backward passes: x and dy, or y and dy): half the
// chunks per tensor, so registers stay as in the forward.
using TwoTensorRows = RowConfig<2>;
// The backward passes that loop over rows (persistent CTA groups) hold two tensors too, two
// chunks of each per thread.
// NOTE: the norm backward's loop also keeps 2·(columns per thread) f32 accumulators live (32
// registers for 16-bit types), so CTAs are capped at 512 threads, which allows up to 128
// registers; 64-register kernels with a loop over rows spill (docs/performance.md).
using LoopingTwoTensorRows = RowConfig<2, kMaxRowThreads / 2>;
// Rows that LoopingTwoTensorRows splits over clusters of more than two CTAs, or cannot hold:
// four chunks per thread, so half the CTAs per cluster, up to 16 (262144 16-bit columns). An
// H200 holds 66 clusters of 2 (every SM), but 30 of 4, 15 of 8 (120 SMs) and 7 of 16: a
// cluster's CTAs share a GPC. Staged in shared memory by the kernels that take them
// (device/row/cluster_exchange.cuh).
using WideClusterRows = RowConfig<4, kMaxRowThreads / 2, 1, kMaxNonPortableClusterCtas>;
// The fp8-quantizing norms: y twice (for the row's amax, then for the stores) with the weight
// and bias loads of both passes live spilled at 64 registers, even at two chunks per thread;
// CTAs of up to 512 threads allow 128.
using QuantizingRows = RowConfig<4, kMaxRowThreads / 2>;
// The same rows on eight chunks per thread (norm_quantize_persistent_kernel, bf16): half the
// threads per row, so half the row's fixed costs per element and half the warps at each
// all-reduce's barrier. Where it runs: src/norm/norm_forward.cu (quantize_chunks).
using QuantizingRows8 = RowConfig<8, kMaxRowThreads / 2>;
// Rows held by few threads of many chunks each (one warp or less up to 4096 16-bit columns, in
// CTAs of 128 threads): the row's fixed costs (the prologue, the reductions' shuffles and their
// exchange through shared memory) spread over more elements per thread, and a row of one warp
// reduces by shuffles alone. Eight chunks at up to 96 registers (five CTAs per SM), sixteen at
// 128. Where each op takes them: src/norm/norm_forward.cu (thread_chunks).
using FewThreadRows8 = RowConfig<8, kMinBlockThreads, 5>;
using FewThreadRows16 = RowConfig<16, kMinBlockThreads, 4>;

// Where a thread's chunks of the row live between the load and the store.
enum class Residence : std::uint8_t {
  Registers,  // RowTile: the fastest, while a row fits CTAs that share an SM
  Shared,     // SharedRowTile: long rows, staged by cp.async (vector access only)
  Reread,     // RereadRowTile: long rows read twice, the second time from L2 (vector access only)
};

// Long rows staged in shared memory: 64 KB per CTA of 256 threads (and as much again for each
// per-column vector a kernel stages beside it), so that one to three CTAs of different rows or
// slices share an SM and one's reduction and stores overlap the others' loads; clusters of up to
// 16 CTAs (non-portable, sm_90) hold 1 MiB rows (262144 f32). Up to 128 registers: the f32 norms
// spilled at the 80 that three CTAs of 256 threads allow.
using SharedRows = RowConfig<16, 256, 2, kMaxNonPortableClusterCtas>;
// The norms' persistent staged kernels: rows in shared memory read by many threads of few chunks
// each (16 warps or more per SM even when the row, the weight and the bias fill the SM's shared
// memory: at 16 chunks per thread, 4–8 warps per SM ran LayerNorm at 1.8 TB/s).
using StagedNormRows = RowConfig<8, kMaxRowThreads / 2, 1, kMaxNonPortableClusterCtas>;

// The norms' long rows read twice (device/row/reread_row_tile.cuh): a CTA per row, no cluster, up
// to 16 chunks per thread in batches of RereadRowTile::kBatch; 64 registers at 1024 threads.
using RereadRows = RowConfig<16, kMaxRowThreads, 1, 1>;

// Rows of at least these many chunks are staged in shared memory. Measured on the H200
// (docs/performance.md, bf16, 2^27 elements): softmax staged from 1024 columns ran at 3.92–4.02
// TB/s at 1024–8192 columns against 3.28–3.70 in registers (issue-bound there); RMSNorm staged
// at 1024–8192 ran 3.36–3.58 against 3.60–3.91 in registers (its weight loads miss the L1 that
// shared memory crowds out), and LayerNorm and add+RMSNorm likewise; from 16384 columns staging
// won for every op (RMSNorm 2.53 → 3.16 at 32768 with a CTA per row, 3.78 persistent) until the
// register kernels lost their chunk tests: the norm launcher now keeps rows that one CTA holds in
// registers (src/norm/norm_forward.cu, residence_of).
inline constexpr int kSharedSoftmaxMinChunks = 128;  // 1024 16-bit elements
inline constexpr int kSharedNormMinChunks = 2048;     // 16384 16-bit elements
// Norm rows without a residual longer than this many chunks are read twice (RereadPacking::FillSm)
// rather than held by a CTA of more than 320 threads in registers. NOTE: measured on the H200
// (session 17, 2^27 elements): at 1536 and 2048 chunks LayerNorm 3.32 → 3.77 and 3.47 → 3.88 TB/s
// (bf16 12288 and 16384 columns), RMSNorm 3.53 → 3.98 and 3.86 → 4.12, f32 LayerNorm at 6144 and
// 8192 columns 3.73 → 4.02 and 3.94 → 4.17; at 1280 chunks (320 threads) the registers won
// (LayerNorm 3.91 against 3.76, RMSNorm 3.96 against 3.94), at 1024 more so (LayerNorm 3.92
// against 3.26).
inline constexpr int kRegisterNormMaxChunks = 1280;  // 10240 16-bit elements

// The element-by-element kernels (rows that are not whole aligned chunks) hold one chunk per
// thread: their per-element bounds checks spilled at four chunks, even at 128 registers, and at
// two (softmax on 16-bit types). So they split rows over clusters of up to 16 CTAs (non-portable,
// sm_90; their all-reduces are row_allreduce's, which holds 16): 131072 16-bit or 65536 f32
// columns on CTAs of up to 1024 threads, half that on the norm backward's 512. At 8 CTAs they
// ended at half that. Softmax reads most such rows by shifted chunks instead (ShiftedRows).
template <class Config>
using ScalarRows = RowConfig<1, Config::kMaxThreads, 1, kMaxNonPortableClusterCtas>;
// Rows read by chunks shifted to the row's phase (Access::Shifted, the softmax kernels): Config's
// chunks, split over clusters of up to 16 CTAs (non-portable, sm_90). A row of n columns spans up
// to n + V − 1 from its first chunk (plan_shifted_rows).
template <class Config>
using ShiftedRows = RowConfig<Config::kChunks, Config::kMaxThreads, Config::kMinCtas, kMaxNonPortableClusterCtas>;

// The run-time layout of a row over threads, CTAs and a cluster.
struct RowLayout {
  int threads = 0;       // per row: 1, 2, 4, 8, 16 (lanes of one warp) or a multiple of 32
  int rows_per_cta = 1;  // > 1 only when threads < kMinBlockThreads
  int cluster = 1;       // CTAs per row
  int slice = 0;         // columns each CTA holds (threads · kChunks · elements per chunk)
  // log2(threads) where rows share a CTA (rows of at most 64 threads: a power of two), so a
  // thread finds its row by a shift. NOTE: the signed division it replaces was ~25 instructions of
  // every row's prologue (ncu, session 18: 5 % of RMSNorm → e4m3's at 4096 columns on 64 threads).
  int row_shift = 0;
  constexpr bool valid() const { return threads > 0; }
  constexpr int block_threads() const { return threads * rows_per_cta; }
};

// The layout of rows of `n` elements of `element_bytes` each, for kernels of `Config`: the
// fewest threads that hold the row at Config::kChunks chunks each, split over the fewest CTAs of
// at most `cta_threads` threads (at most `device_cluster` of them, the GPU's limit, and
// Config::kMaxCluster; larger CTAs when that is not enough). Invalid when the row does not fit.
template <class Config>
constexpr RowLayout plan_rows(std::int64_t n, int element_bytes, int device_cluster,
                              int cta_threads = kPreferredRowThreads) {
  const int max_cluster = std::min(device_cluster, Config::kMaxCluster);
  const int per_chunk = kChunkBytes / element_bytes;
  const std::int64_t chunks = (n + per_chunk - 1) / per_chunk;
  const std::int64_t preferred = std::int64_t{std::min(cta_threads, Config::kMaxThreads)} * Config::kChunks;
  std::int64_t cluster = (chunks + preferred - 1) / preferred;
  if (cluster > max_cluster) cluster = (chunks + Config::kCapacity - 1) / Config::kCapacity;
  if (n < 1 || cluster > max_cluster) return {};
  const std::int64_t chunks_per_cta = (chunks + cluster - 1) / cluster;
  const std::int64_t needed = (chunks_per_cta + Config::kChunks - 1) / Config::kChunks;
  RowLayout layout;
  if (needed <= kWarpThreads) {
    layout.threads = 1;
    while (layout.threads < needed) layout.threads *= 2;  // lanes of a warp: a power of two
  } else {
    layout.threads = static_cast<int>((needed + kWarpThreads - 1) / kWarpThreads * kWarpThreads);
  }
  layout.rows_per_cta = std::max(1, kMinBlockThreads / layout.threads);
  while ((2 << layout.row_shift) <= layout.threads) ++layout.row_shift;
  layout.cluster = static_cast<int>(cluster);
  layout.slice = layout.threads * Config::kChunks * per_chunk;
  return layout;
}

// The layout of rows of `n` elements read by chunks shifted to the row's phase (Access::Shifted):
// from the start of its first chunk a row spans up to V − 1 columns more than n.
template <class Config>
constexpr RowLayout plan_shifted_rows(std::int64_t n, int element_bytes, int device_cluster,
                                      int cta_threads = kPreferredRowThreads) {
  if (n < 1) return {};
  return plan_rows<Config>(n + kChunkBytes / element_bytes - 1, element_bytes, device_cluster, cta_threads);
}

// How rows read twice (RereadRows, device/row/reread_row_tile.cuh) are laid over CTAs: one CTA
// per row either way, no cluster.
enum class RereadPacking : std::uint8_t {
  // The fewest warps of at most kRereadThreadChunks chunks each (up to RereadRows::kChunks at 1024
  // threads): add+norm, whose rows ran 1–5 % slower packed (session 16).
  FewestWarps,
  // CTAs of 1024/k threads, k rows per SM (64 registers: an SM's 1024 threads), k the largest of
  // kMaxRereadRowsPerSm, …, 2 whose threads hold the row at RereadRows::kChunks chunks each and
  // whose k rows stay within kRereadRowBytesPerSm; else FewestWarps (one row per SM); rows of more
  // than kRereadThreadChunks chunks per thread of a 1024-thread CTA are not read twice.
  FillSm,
};
inline constexpr int kRereadThreadChunks = 8;
inline constexpr int kMaxRereadRowsPerSm = 4;
// NOTE: measured on the H200 (session 16, bf16 LayerNorm / RMSNorm): packed at 160–192 KB of rows
// per SM the rows between the powers of two ran up to 12 % faster than the fewest warps, whose CTAs
// left an SM's threads part idle (40000 columns: 640 threads, 3.26 → 3.67 TB/s LayerNorm at two
// 512-thread CTAs; 49152: 3.43 → 3.68; 24000: 3.69 → 3.82 at four 256-thread CTAs); at 224 KB
// (28672 columns, four CTAs) LayerNorm lost 3 %, at 256 KB (65536, two CTAs) 23 % (session 15);
// one row per SM, 1024 threads of 7 chunks ran 1.6 % slower than the fewest warps (896 threads of
// 8 chunks, LayerNorm at 57344 columns).
inline constexpr std::int64_t kRereadRowBytesPerSm = 192 * 1024;

// The layout of rows of `n` elements of `element_bytes` read twice. Invalid when one CTA does not
// hold the row (or, FillSm, past kRereadThreadChunks chunks per thread of a 1024-thread CTA).
// NOTE: at 64 registers an SM holds 1024 of these threads whatever the CTA size, so the rows in
// flight in L2 are set by the rows per SM: 256-thread CTAs of 16 chunks at 65536 bf16 columns
// (50 MB in L2) lost 20 % (session 13).
constexpr RowLayout plan_reread_rows(std::int64_t n, int element_bytes, RereadPacking packing) {
  RowLayout layout = plan_rows<RereadRows>(n, element_bytes, 1);
  if (!layout.valid() || layout.threads < kWarpThreads) return layout;
  const int per_chunk = kChunkBytes / element_bytes;
  const std::int64_t chunks = (n + per_chunk - 1) / per_chunk;
  const std::int64_t warps = (chunks + std::int64_t{kRereadThreadChunks} * kWarpThreads - 1) /
                             (std::int64_t{kRereadThreadChunks} * kWarpThreads);
  layout.threads = std::max(layout.threads, static_cast<int>(std::min<std::int64_t>(warps * kWarpThreads,
                                                                                    RereadRows::kMaxThreads)));
  if (packing == RereadPacking::FillSm) {
    if (chunks > std::int64_t{kMaxRowThreads} * kRereadThreadChunks) return {};
    int rows_per_sm = kMaxRereadRowsPerSm;
    while (rows_per_sm > 1 && (chunks > std::int64_t{kMaxRowThreads / rows_per_sm} * RereadRows::kChunks ||
                               rows_per_sm * n * element_bytes > kRereadRowBytesPerSm))
      rows_per_sm /= 2;
    if (rows_per_sm > 1) layout.threads = kMaxRowThreads / rows_per_sm;
  }
  layout.slice = layout.threads * RereadRows::kChunks * per_chunk;
  return layout;
}

// The longest row a config holds, for error messages.
template <class Config>
constexpr std::int64_t max_row_length(int element_bytes, int device_cluster) {
  return std::int64_t{Config::kCapacity} * std::min(device_cluster, Config::kMaxCluster) *
         (kChunkBytes / element_bytes);
}
template <class Config>
constexpr std::int64_t max_shifted_row_length(int element_bytes, int device_cluster) {
  return max_row_length<Config>(element_bytes, device_cluster) - (kChunkBytes / element_bytes - 1);
}

}  // namespace fusekit::device
