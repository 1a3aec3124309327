#pragma once
// Host side of the row kernels (norms, softmax): argument checks they share, the row layout of a
// tensor, the vector-or-scalar access decision, and the launch (with a cluster when a row is
// split over CTAs). Included by src/norm/*.cu, src/softmax/*.cu and
// src/pointwise/pointwise_chain.cu (for vector_aligned) only.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fusekit/device/row/row_config.hpp"
#include "fusekit/device/row/row_tile.cuh"
#include "fusekit/device/row/shared_row_tile.cuh"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit::rows {

inline constexpr int kClusterMinMajor = 9;  // thread-block clusters need sm_90
inline constexpr std::int64_t kMaxRows = UINT32_MAX;  // row indices are 32-bit in the kernels

// [rows, n] or [batch, rows, n], with its rows flattened.
struct RowShape {
  std::int64_t rows = 0;            // all rows, batches flattened
  std::int64_t rows_per_batch = 1;  // rows of one batch (rank 2: all of them)
  std::int64_t n = 0;               // row length
};

inline std::string join(std::string_view a, std::string_view b) {
  std::string s(a);
  return s.append(b);
}

// The structure of a row tensor (no device access): non-null, rank 2 or 3, unit inner stride,
// a float dtype of `allowed`.
inline RowShape check_rows(std::string_view arg, const TensorView& t, std::initializer_list<DType> allowed) {
  check::structure(arg, t);
  require(t.rank == 2 || t.rank == 3, join(arg, " rank"), "2 ([rows, n]) or 3 ([batch, rows, n])", t.rank);
  check::dtype(arg, t, allowed);
  RowShape s;
  s.n = t.shape[t.rank - 1];
  s.rows_per_batch = t.shape[t.rank - 2];
  s.rows = t.rank == 3 ? t.shape[0] * s.rows_per_batch : s.rows_per_batch;
  require(s.n >= 1, join(arg, " row length"), ">= 1", s.n);
  require(s.rows <= kMaxRows, join(arg, " rows"), "at most 2^32 - 1", s.rows);
  return s;
}

// A tensor like `like` in shape, in `dtype`.
inline void check_like(std::string_view arg, const TensorView& t, std::string_view like_arg, const TensorView& like,
                       DType dtype) {
  check::structure(arg, t);
  check::same_shape(arg, t, like_arg, like);
  require(t.dtype == dtype, join(arg, " dtype"), dtype_name(dtype), dtype_name(t.dtype));
}

// An optional per-column vector [n] of `dtype`.
inline void check_column_vector(std::string_view arg, const TensorView& t, std::int64_t n, DType dtype) {
  if (t.empty()) return;
  check::structure(arg, t);
  check::shape(arg, t, {n});
  require(t.dtype == dtype, join(arg, " dtype"), dtype_name(dtype), dtype_name(t.dtype));
}

// An optional per-row f32 vector, packed, `rows` elements.
inline void check_row_stats(std::string_view arg, const TensorView& t, std::int64_t rows) {
  if (t.empty()) return;
  check::structure(arg, t);
  check::dtype(arg, t, {DType::F32});
  require(t.numel() == rows, join(arg, " elements"), rows, t.numel());
  require(t.is_contiguous(), join(arg, " layout"), "packed", t.describe());
}

inline void check_on_device(std::initializer_list<std::pair<std::string_view, const TensorView*>> tensors) {
  for (const auto& [arg, t] : tensors)
    if (!t->empty()) check::on_current_device(arg, *t);
}

inline device::RowAddress address(const TensorView& t) {
  if (t.empty()) return {};
  return {t.data, t.strides[t.rank - 2], t.rank == 3 ? t.strides[0] : 0};
}

// Whether a tensor allows `bytes`-wide accesses at every row start.
inline bool vector_aligned(const TensorView& t, std::size_t bytes) {
  if (t.empty()) return true;
  if (reinterpret_cast<std::uintptr_t>(t.data) % bytes != 0) return false;
  for (int d = 0; d + 1 < t.rank; ++d)
    if ((static_cast<std::size_t>(t.strides[d]) * t.element_size()) % bytes != 0) return false;
  return true;
}

// Vector when every tensor is aligned to its chunk (kChunkBytes of the compute dtype's elements)
// and rows of n elements are whole chunks.
inline device::Access access_for(int chunk_elements, std::int64_t n, std::initializer_list<const TensorView*> tensors) {
  if (n % chunk_elements != 0) return device::Access::Scalar;
  for (const TensorView* t : tensors)
    if (!vector_aligned(*t, static_cast<std::size_t>(chunk_elements) * t->element_size()))
      return device::Access::Scalar;
  return device::Access::Vector;
}

// The phase of every row of t (device::row_phase) is the same as `like`'s: the same element size,
// the same start within a 16-byte boundary, and every stride the same number of bytes past one.
inline bool same_row_phases(const TensorView& t, const TensorView& like) {
  const auto phase = [](std::int64_t bytes) { return bytes % device::kChunkBytes; };
  const auto size = static_cast<std::int64_t>(t.element_size());
  if (size != static_cast<std::int64_t>(like.element_size()) || t.rank != like.rank) return false;
  const auto start = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(t.data));
  const auto like_start = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(like.data));
  if (start % size != 0 || phase(start) != phase(like_start)) return false;
  for (int d = 0; d + 1 < t.rank; ++d)
    if (phase(t.strides[d] * size) != phase(like.strides[d] * size)) return false;
  return true;
}

// access_for's choice for kernel families that also read shifted rows (softmax): Shifted where it
// says Scalar but every tensor's rows have the first tensor's phases (contiguous rows of odd
// length; views offset by whole elements).
inline device::Access shifted_access_for(int chunk_elements, std::int64_t n,
                                         std::initializer_list<const TensorView*> tensors) {
  const device::Access access = access_for(chunk_elements, n, tensors);
  if (access != device::Access::Scalar) return access;
  const TensorView& first = **tensors.begin();
  for (const TensorView* t : tensors)
    if (!same_row_phases(*t, first)) return device::Access::Scalar;
  return device::Access::Shifted;
}

// The row config of a kernel family's `access` variant: Config itself for Vector and Whole, its
// ScalarRows for Scalar, its ShiftedRows for Shifted.
template <class Config, device::Access kAccess>
using ConfigFor = std::conditional_t<
    kAccess == device::Access::Scalar, device::ScalarRows<Config>,
    std::conditional_t<kAccess == device::Access::Shifted, device::ShiftedRows<Config>, Config>>;

// Whether rows of n columns read with vector access can be read as Whole under `layout`: every
// thread's chunks inside its row (the row is exactly its CTAs' slices) and no CTA holding a row
// past the last.
inline bool whole_slices(const device::RowLayout& layout, std::int64_t n) {
  return n == std::int64_t{layout.slice} * layout.cluster;
}
inline bool whole_rows(const device::RowLayout& layout, std::int64_t n, std::int64_t rows) {
  return whole_slices(layout, n) && rows % layout.rows_per_cta == 0;
}

// Which access variants a kernel family is compiled for.
enum class Accesses : std::uint8_t {
  VectorScalar,         // the norms
  VectorScalarShifted,  // softmax
};

// Calls f(std::integral_constant<Access, access>{}): a kernel template's access as a constant, of
// the variants kAccesses compiles.
template <Accesses kAccesses = Accesses::VectorScalar, class F>
void with_access(device::Access access, F&& f) {
  using device::Access;
  if (access == Access::Vector) return f(std::integral_constant<Access, Access::Vector>{});
  if constexpr (kAccesses == Accesses::VectorScalarShifted)
    if (access == Access::Shifted) return f(std::integral_constant<Access, Access::Shifted>{});
  require(access == Access::Scalar, "row access", "a variant this kernel family is compiled for",
          static_cast<int>(access));
  f(std::integral_constant<Access, Access::Scalar>{});
}

// Which residence variants a kernel family is compiled for.
enum class Residences : std::uint8_t {
  RegistersShared,        // softmax
  RegistersSharedReread,  // the norm forward (device/row/reread_row_tile.cuh)
};

// Calls f(std::integral_constant<Residence, residence>{}); Reread only for kernel families that
// have reread kernels (Residences::RegistersSharedReread).
template <Residences kResidences, class F>
void with_residence(device::Residence residence, F&& f) {
  switch (residence) {
    case device::Residence::Shared: return f(std::integral_constant<device::Residence, device::Residence::Shared>{});
    case device::Residence::Reread:
      if constexpr (kResidences == Residences::RegistersSharedReread)
        return f(std::integral_constant<device::Residence, device::Residence::Reread>{});
      else throw Error(ErrorKind::Unsupported, "rows read twice: not for this kernel family");
    case device::Residence::Registers:
      return f(std::integral_constant<device::Residence, device::Residence::Registers>{});
  }
}

// Calls f(access, residence) as constants for the kernels that exist: rows staged in shared
// memory or reread are read as whole (or shifted) vectors only.
template <Residences kResidences = Residences::RegistersShared, Accesses kAccesses = Accesses::VectorScalar, class F>
void with_placement(device::Access access, device::Residence residence, F&& f) {
  with_access<kAccesses>(access, [&](auto kAccess) {
    with_residence<kResidences>(residence, [&](auto kResidence) {
      if constexpr (kAccess() != device::Access::Scalar || kResidence() == device::Residence::Registers)
        f(kAccess, kResidence);
    });
  });
}

// The dynamic shared memory of a kernel's CTA: the staged rows, if any.
template <device::Residence kResidence, class T, class Config>
std::size_t shared_bytes(const device::RowLayout& layout) {
  if constexpr (kResidence == device::Residence::Shared) return device::SharedRowTile<T, Config>::bytes(layout);
  else return 0;
}

// The CTAs a cluster may have on this GPU (non-portable sizes included; each config caps its own).
inline int max_cluster_ctas() {
  const DeviceInfo info = current_device_info();
  return info.cc_major >= kClusterMinMajor ? device::kMaxNonPortableClusterCtas : 1;
}

// The layout of rows of `n` elements of `dtype` for kernels of `Config` read with `access`
// (Shifted rows span up to V − 1 columns more), or an Unsupported error.
template <class Config>
device::RowLayout plan(std::string_view arg, std::int64_t n, DType dtype,
                       int cta_threads = device::kPreferredRowThreads,
                       device::Access access = device::Access::Vector) {
  const int max_cluster = max_cluster_ctas();
  const auto element = static_cast<int>(dtype_size(dtype));
  const bool shifted = access == device::Access::Shifted;
  const device::RowLayout layout = shifted ? device::plan_shifted_rows<Config>(n, element, max_cluster, cta_threads)
                                           : device::plan_rows<Config>(n, element, max_cluster, cta_threads);
  const std::int64_t longest = shifted ? device::max_shifted_row_length<Config>(element, max_cluster)
                                       : device::max_row_length<Config>(element, max_cluster);
  if (!layout.valid())
    throw Error(ErrorKind::Unsupported,
                join(arg, ": row length expected <= " + std::to_string(longest) + " for " +
                              std::string(dtype_name(dtype)) + " on this GPU" +
                              (max_cluster == 1 ? " (no thread-block clusters before sm_90)" : "") + ", got " +
                              std::to_string(n)));
  return layout;
}

// Where rows of n elements of `dtype` live in a kernel of `access`: shared memory for rows of at
// least `shared_min_chunks` chunks (vector or shifted access), registers otherwise.
// NOTE: shared rows hold the longest rows of every config, so a row too long for them is
// reported with their limit.
inline device::Residence residence_for(device::Access access, std::int64_t n, DType dtype, int shared_min_chunks) {
  const std::int64_t chunks = n / (device::kChunkBytes / static_cast<std::int64_t>(dtype_size(dtype)));
  return access != device::Access::Scalar && chunks >= shared_min_chunks ? device::Residence::Shared
                                                                         : device::Residence::Registers;
}

// The row config of a kernel family for `access` and `residence`: SharedRows for rows staged in
// shared memory, ConfigFor<Config, access> otherwise.
template <class Config, device::Access kAccess, device::Residence kResidence>
using ResidentConfig = std::conditional_t<
    kResidence == device::Residence::Shared, device::SharedRows,
    std::conditional_t<kResidence == device::Residence::Reread, device::RereadRows, ConfigFor<Config, kAccess>>>;

// A row kernel's launch configuration: its CTA, dynamic shared memory and cluster (the kernel's
// attributes set for them); the caller sets the grid.
template <class Params>
struct RowLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster{};

  RowLaunch(void (*kernel)(Params), const device::RowLayout& layout, std::size_t shared_bytes, cudaStream_t stream,
            std::string_view name) {
    config.blockDim = dim3(static_cast<unsigned>(layout.block_threads()));
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    if (shared_bytes > 0)
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
                 join(name, " shared memory"));
    if (layout.cluster > device::kMaxClusterCtas)
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                 join(name, " cluster size"));
    if (layout.cluster > 1) {
      cluster.id = cudaLaunchAttributeClusterDimension;
      cluster.val.clusterDim.x = static_cast<unsigned>(layout.cluster);
      cluster.val.clusterDim.y = 1;
      cluster.val.clusterDim.z = 1;
      config.attrs = &cluster;
      config.numAttrs = 1;
    }
  }
  // NOTE: config.attrs points into this object.
  RowLaunch(const RowLaunch&) = delete;
  RowLaunch& operator=(const RowLaunch&) = delete;
};

// Launches kernel<<<row groups × cluster, layout's CTA, shared_bytes>>>(params), as clusters of
// `layout.cluster` CTAs when a row is split.
template <class Params>
void launch(void (*kernel)(Params), const device::RowLayout& layout, std::int64_t rows, const Params& params,
            cudaStream_t stream, std::string_view name, std::size_t shared_bytes = 0) {
  const std::int64_t row_groups = (rows + layout.rows_per_cta - 1) / layout.rows_per_cta;
  const std::int64_t ctas = row_groups * layout.cluster;
  require(ctas <= INT_MAX, join(name, " rows"), "fewer (the grid would exceed 2^31 - 1 CTAs)", rows);
  RowLaunch<Params> l(kernel, layout, shared_bytes, stream, name);
  l.config.gridDim = dim3(static_cast<unsigned>(ctas));
  check_cuda(cudaLaunchKernelEx(&l.config, kernel, params), std::string(name));
  check_launch(name);
}

// How many CTA groups (clusters of `layout.cluster`) of `kernel` with `shared_bytes` each are
// resident at once on the device's SMs, or on set_sm_limit's share of them.
// NOTE: for clusters the occupancy per SM times the SMs over-counts: a cluster's CTAs must share
// one GPC, and the GPCs' SM counts are not multiples of the cluster (session 19); under a cap,
// the device's resident clusters are scaled by the cap's share of its SMs.
template <class Params>
std::int64_t resident_groups(void (*kernel)(Params), const device::RowLayout& layout, std::size_t shared_bytes,
                             std::string_view name) {
  RowLaunch<Params> l(kernel, layout, shared_bytes, nullptr, name);
  int groups = 0;
  if (layout.cluster > 1) {
    l.config.gridDim = dim3(static_cast<unsigned>(layout.cluster));
    check_cuda(cudaOccupancyMaxActiveClusters(&groups, kernel, &l.config), join(name, " occupancy"));
    const DeviceInfo& device = current_device_info();
    if (groups > 0 && device.sm_count < device.device_sm_count)
      groups = std::max(1, static_cast<int>(std::int64_t{groups} * device.sm_count / device.device_sm_count));
  } else {
    int per_sm = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, layout.block_threads(), shared_bytes),
               join(name, " occupancy"));
    groups = per_sm * current_device_info().sm_count;
  }
  require(groups >= 1, join(name, " resident CTAs"), ">= 1 with this shared memory", groups);
  return groups;
}

// Launches a persistent row kernel: as many CTA groups (clusters of `layout.cluster`) as are
// resident at once with `shared_bytes` each, at most one per row; group g takes rows g, g + G, ….
template <class Params>
void launch_persistent(void (*kernel)(Params), const device::RowLayout& layout, std::int64_t rows,
                       const Params& params, cudaStream_t stream, std::string_view name, std::size_t shared_bytes) {
  require(layout.rows_per_cta == 1, join(name, " rows per CTA"), 1, layout.rows_per_cta);
  const std::int64_t groups = std::min(rows, resident_groups(kernel, layout, shared_bytes, name));
  RowLaunch<Params> l(kernel, layout, shared_bytes, stream, name);
  l.config.gridDim = dim3(static_cast<unsigned>(groups * layout.cluster));
  check_cuda(cudaLaunchKernelEx(&l.config, kernel, params), std::string(name));
  check_launch(name);
}

// Launches a persistent kernel of CTAs that hold several rows of `row` (whole warps each, one row
// per group: row.rows_per_cta is 1) with `shared_bytes(groups)` per CTA of `groups` rows: the CTA
// size of at most `max_groups` rows that leaves the most threads resident per SM (the larger CTA
// where two tie; sizes whose shared memory, with the kernel's static scratch, exceeds a CTA's
// are not tried), as many CTAs as are resident at once, at most one per `groups` rows.
// NOTE: the choice takes two runtime calls per CTA size tried (up to 56 for rows of one warp, tens
// of µs of host time), so it is made once per device, kernel, row and shared-memory sizes.
template <class Params, class SharedBytes>
void launch_row_groups(void (*kernel)(Params), const device::RowLayout& row, int max_groups, std::int64_t rows,
                       const Params& params, cudaStream_t stream, std::string_view name, SharedBytes&& shared_bytes) {
  require(row.rows_per_cta == 1 && row.threads % device::kWarpThreads == 0, join(name, " row"),
          "whole warps, one row per group", row.threads);
  const int most_groups = std::min(max_groups, device::kMaxRowThreads / row.threads);
  std::vector<std::size_t> bytes_by_groups;
  for (int groups = 1; groups <= most_groups; ++groups) bytes_by_groups.push_back(shared_bytes(groups));
  struct Choice {
    int groups = 0, per_sm = 0;
  };
  using Key = std::tuple<int, const void*, int, std::vector<std::size_t>>;
  static std::mutex mutex;
  static std::map<Key, Choice> chosen;
  const DeviceInfo& device = current_device_info();
  Key key{device.index, reinterpret_cast<const void*>(kernel), row.threads, bytes_by_groups};
  Choice choice;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = chosen.find(key); it != chosen.end()) choice = it->second;
  }
  if (choice.groups == 0) {
    int best_threads = 0;
    cudaFuncAttributes attributes{};
    check_cuda(cudaFuncGetAttributes(&attributes, kernel), join(name, " attributes"));
    const std::size_t static_bytes = attributes.sharedSizeBytes;
    for (int groups = 1; groups <= most_groups; ++groups) {
      device::RowLayout cta = row;
      cta.rows_per_cta = groups;
      const std::size_t bytes = bytes_by_groups[static_cast<std::size_t>(groups - 1)];
      if (bytes + static_bytes > device.smem_per_block_optin) continue;
      RowLaunch<Params> l(kernel, cta, bytes, nullptr, name);
      int per_sm = 0;
      check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, cta.block_threads(), bytes),
                 join(name, " occupancy"));
      if (per_sm > 0 && per_sm * cta.block_threads() >= best_threads) {
        choice = {groups, per_sm};
        best_threads = per_sm * cta.block_threads();
      }
    }
    require(choice.groups > 0, join(name, " resident CTAs"), ">= 1 with its shared memory", 0);
    const std::lock_guard<std::mutex> lock(mutex);
    chosen.emplace(std::move(key), choice);
  }
  device::RowLayout cta = row;
  cta.rows_per_cta = choice.groups;
  const std::int64_t ctas = std::min<std::int64_t>((rows + choice.groups - 1) / choice.groups,
                                                   std::int64_t{choice.per_sm} * device.sm_count);
  RowLaunch<Params> l(kernel, cta, bytes_by_groups[static_cast<std::size_t>(choice.groups - 1)], stream, name);
  l.config.gridDim = dim3(static_cast<unsigned>(ctas));
  check_cuda(cudaLaunchKernelEx(&l.config, kernel, params), std::string(name));
  check_launch(name);
}

}  // namespace fusekit::rows
