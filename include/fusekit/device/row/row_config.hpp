#pragma once
// How the row kernels (norms, softmax) lay a row over threads, and which layout a row length
// takes. Pure constexpr C++: the host planner and the device kernels read the same table.
//
// A row (or, in a thread-block cluster, one CTA's slice of it) is held in registers: each of the
// row's kThreadsPerRow threads owns kChunks 16-byte vectors, so x is read from memory once.
// Rows longer than one CTA holds are split over a cluster of CTAs whose partial sums meet in
// distributed shared memory (sm_90+); the row is still read once.
#include <algorithm>
#include <cstdint>

namespace fusekit::device {

inline constexpr int kWarpThreads = 32;
inline constexpr int kChunkBytes = 16;        // one 128-bit load or store per chunk
inline constexpr int kWarpRowBlockThreads = 128;  // warp-per-row layouts run 4 rows per CTA
inline constexpr int kMaxClusterCtas = 8;     // the portable cluster size limit

enum class ClusterUse : std::uint8_t {
  Never,    // one CTA (or one warp) per row
  Allowed,  // one CTA per row, or a cluster of them on sm_90+
  Only,     // only as a cluster (sm_90+): the layout for the longest rows
};

template <int kThreadsPerRow_, int kChunks_, ClusterUse kClusterUse_>
struct RowConfig {
  static constexpr int kThreadsPerRow = kThreadsPerRow_;
  static constexpr int kChunks = kChunks_;  // 16-byte vectors per thread (per tensor held)
  static constexpr ClusterUse kClusterUse = kClusterUse_;
  static constexpr int kMaxCluster = kClusterUse == ClusterUse::Never ? 1 : kMaxClusterCtas;  // CTAs per row
  static constexpr int kBlockThreads = std::max(kThreadsPerRow, kWarpRowBlockThreads);
  static constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  static constexpr int kCapacity = kThreadsPerRow * kChunks;  // chunks of a row one CTA holds
  static_assert(kThreadsPerRow % kWarpThreads == 0, "a row is held by whole warps");
  static_assert(kClusterUse == ClusterUse::Never || kRowsPerBlock == 1, "only CTA-per-row layouts form clusters");
};

template <class... Configs>
struct RowConfigList {
  static constexpr int kCount = sizeof...(Configs);
  static constexpr int kThreads[] = {Configs::kThreadsPerRow...};
  static constexpr int kCapacity[] = {Configs::kCapacity...};
  static constexpr int kMaxCluster[] = {Configs::kMaxCluster...};
  static constexpr ClusterUse kClusterUse[] = {Configs::kClusterUse...};
};

// NOTE: ops that hold one tensor of the row (norm and softmax forward). The smallest layout that
// holds the row wins, so short rows keep many rows in flight per SM; the 512×4 layout splits over
// clusters before the 512×8 one is used, because two or three 512×4 CTAs share an SM
// (overlapping one CTA's reductions with another's loads) where a 512×8 CTA is alone. No layout
// has 1024 threads: that caps registers at 64, and the kernels want 80–120.
// bf16 row lengths (f32: half): ≤256, ≤1024, ≤4096, ≤16384 (cluster: ≤131072), ≤262144 (sm_90+).
using OneTensorConfigs =
    RowConfigList<RowConfig<32, 1, ClusterUse::Never>, RowConfig<32, 4, ClusterUse::Never>,
                  RowConfig<128, 4, ClusterUse::Never>, RowConfig<512, 4, ClusterUse::Allowed>,
                  RowConfig<512, 8, ClusterUse::Only>>;

// NOTE: softmax forward stops at the 512×4 cluster layout: at 512×8 it holds the row and its
// running (max, sum) in more than the 128 registers a 512-thread CTA may have per thread, and
// spilled 64 bytes per thread (check-resources). Rows past 131072 (bf16) need a re-read pass.
using SoftmaxForwardConfigs =
    RowConfigList<RowConfig<32, 1, ClusterUse::Never>, RowConfig<32, 4, ClusterUse::Never>,
                  RowConfig<128, 4, ClusterUse::Never>, RowConfig<512, 4, ClusterUse::Allowed>>;

// NOTE: ops that hold two tensors of the row (the backward passes: x and dy, or y and dy) take
// half the chunks per tensor, so registers stay as in the forward.
// bf16 row lengths (f32: half): ≤256, ≤512, ≤2048, ≤8192 (cluster: ≤65536), ≤131072 (sm_90+).
using TwoTensorConfigs =
    RowConfigList<RowConfig<32, 1, ClusterUse::Never>, RowConfig<32, 2, ClusterUse::Never>,
                  RowConfig<128, 2, ClusterUse::Never>, RowConfig<512, 2, ClusterUse::Allowed>,
                  RowConfig<512, 4, ClusterUse::Only>>;

struct RowPlan {
  int config = -1;  // index into the config list; -1: no layout holds the row
  int cluster = 1;  // CTAs per row
  int slice = 0;    // columns each CTA of a cluster holds (a multiple of the vector width)
};

// The layout of a row of `n` elements of `element_bytes` each: the first config that holds the
// row in one CTA or, within `max_cluster`, in a cluster of them.
template <class List>
constexpr RowPlan plan_rows(std::int64_t n, int element_bytes, int max_cluster) {
  const int per_chunk = kChunkBytes / element_bytes;
  const std::int64_t chunks = (n + per_chunk - 1) / per_chunk;
  for (int c = 0; c < List::kCount; ++c) {
    if (max_cluster == 1 && List::kClusterUse[c] == ClusterUse::Only) continue;
    const std::int64_t capacity = List::kCapacity[c];
    const int cluster_limit = std::min(List::kMaxCluster[c], max_cluster);
    if (chunks <= capacity * cluster_limit) {
      const auto cluster = static_cast<int>(std::max<std::int64_t>(1, (chunks + capacity - 1) / capacity));
      return {c, cluster, static_cast<int>(capacity * per_chunk)};
    }
  }
  return {};
}

// The longest row a list holds, for error messages.
template <class List>
constexpr std::int64_t max_row_length(int element_bytes, int max_cluster) {
  std::int64_t longest = 0;
  for (int c = 0; c < List::kCount; ++c)
    if (max_cluster > 1 || List::kClusterUse[c] != ClusterUse::Only)
      longest = std::max<std::int64_t>(longest, std::int64_t{List::kCapacity[c]} *
                                                  std::min(List::kMaxCluster[c], max_cluster) *
                                                  (kChunkBytes / element_bytes));
  return longest;
}

}  // namespace fusekit::device
