#pragma once
// Shared by the row-kernel GPU tests (norms, softmax, forward and backward): row shapes that take
// every kind of layout, a padded matrix over its own storage, and whether a kernel family holds
// a row on this GPU.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "fusekit/buffer.hpp"
#include "fusekit/device/row/row_config.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/tensor.hpp"
#include "fusekit/transfer.hpp"

namespace fusekit::testing {

struct RowShape {
  std::int64_t rows, n, ld;  // ld: row stride in elements (>= n)
};

// Row lengths that take every kind of layout (device::plan_rows; bf16): sub-warp groups of 1, 4
// and 16 lanes with many rows per CTA (rows not a multiple of it), a warp, 64 threads (two rows
// per CTA), 96 threads (three warps), full CTAs, clusters of 2, 4 and 8 CTAs (full and not);
// odd lengths and padded row strides (aligned and not) take the element-by-element kernels
// (softmax: chunks shifted to each row's phase), also clustered (40001); rows of whole chunks are staged in shared memory by the forward kernels
// (softmax from 1024 columns, several rows per CTA below 4096), in clusters of up to 16 CTAs
// (262144 f32), or read twice by the norms in CTAs of 256 (12288 and 20480, padded; 16384), 512
// (40000) and 1024 threads (65536; the quantizing norms from 16384, LayerNorm → e4m3 three
// times); the bf16 norms' whole rows on few
// threads of 8 or 16 chunks (1024, 2048 in 24 rows, 4096, 6144, 8192: src/norm/norm_forward.cu).
inline constexpr RowShape kRowShapes[] = {
    {5, 8, 8},           {67, 128, 128},     {33, 200, 203},     {64, 1024, 1024},  {37, 1000, 1000},
    {33, 2048, 2048},    {24, 2048, 2048},   {16, 4096, 4104},   {8, 6144, 6152},   {9, 3001, 3001},
    {5, 8192, 8200},     {3, 12288, 12296},  {4, 16384, 16384},  {3, 12347, 12350}, {3, 20480, 20488},
    {3, 40000, 40000},   {2, 40001, 40008},  {2, 65536, 65536},  {2, 131071, 131072}, {2, 262144, 262144}};

// A padded [rows, n] matrix view in device memory that owns its buffer, starting `offset`
// elements into it.
struct PaddedRows {
  DeviceBuffer buffer;
  TensorView view;
  TensorView storage;  // the whole buffer as one row: the view and the elements around it
  std::int64_t offset;
  PaddedRows(DType dtype, const RowShape& s, std::int64_t offset_ = 0)
      : buffer(static_cast<std::size_t>(s.rows * s.ld + offset_) * dtype_size(dtype)),
        view(TensorView::matrix(static_cast<char*>(buffer.data()) + offset_ * static_cast<std::int64_t>(dtype_size(dtype)),
                                dtype, s.rows, s.n, s.ld)),
        storage(TensorView::matrix(buffer.data(), dtype, 1, s.rows * s.ld + offset_, s.rows * s.ld + offset_)),
        offset(offset_) {}
  // How many elements around the view (before it, in its rows' padding) are not NaN: after
  // poison(storage), the elements a kernel wrote outside the view.
  std::int64_t written_around() const {
    const std::vector<double> all = download(storage);
    std::int64_t written = 0;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(all.size()); ++i) {
      const std::int64_t e = i - offset;
      const bool in_view = e >= 0 && e % view.strides[0] < view.shape[1];
      if (!in_view && !std::isnan(all[static_cast<std::size_t>(i)])) ++written;
    }
    return written;
  }
};

// Whether the kernels of `Config` hold a row of shape s on this GPU (thread-block clusters on
// sm_90): rows of whole aligned 16-byte chunks take Config, or `Staged` (the forward kernels'
// shared-memory rows; void: none) where it holds more, others Config's ScalarRows.
template <class Config, class Staged = void>
bool holds_row(DType dt, const RowShape& s) {
  const int max_cluster = current_device_info().cc_major >= 9 ? device::kMaxNonPortableClusterCtas : 1;
  const auto element = static_cast<int>(dtype_size(dt));
  const std::int64_t chunk = device::kChunkBytes / element;
  const bool vector = s.n % chunk == 0 && s.ld % chunk == 0;
  if (!vector) return s.n <= device::max_row_length<device::ScalarRows<Config>>(element, max_cluster);
  std::int64_t longest = device::max_row_length<Config>(element, max_cluster);
  if constexpr (!std::is_void_v<Staged>)
    longest = std::max(longest, device::max_row_length<Staged>(element, max_cluster));
  return s.n <= longest;
}

// Whether the tensors of a kernel family's rows start the same number of elements past a 16-byte
// boundary, row by row.
enum class RowPhases : std::uint8_t { Same, Mixed };

// holds_row for kernel families that read rows of one phase by chunks shifted to it (softmax:
// device::Access::Shifted): such rows that are not whole aligned chunks take Config's ShiftedRows
// or `Staged` (the forward's shared-memory rows);
// rows of mixed phases take its ScalarRows. `offset`: where the views start in their buffers, in
// elements.
template <class Config, class Staged = void>
bool holds_phased_row(DType dt, const RowShape& s, std::int64_t offset, RowPhases phases) {
  const int max_cluster = current_device_info().cc_major >= 9 ? device::kMaxNonPortableClusterCtas : 1;
  const auto element = static_cast<int>(dtype_size(dt));
  if (phases == RowPhases::Mixed) return s.n <= device::max_row_length<device::ScalarRows<Config>>(element, max_cluster);
  const std::int64_t chunk = device::kChunkBytes / element;
  if (s.n % chunk == 0 && s.ld % chunk == 0 && offset % chunk == 0) return holds_row<Config, Staged>(dt, s);
  std::int64_t longest = device::max_shifted_row_length<device::ShiftedRows<Config>>(element, max_cluster);
  if constexpr (!std::is_void_v<Staged>)
    longest = std::max(longest, device::max_shifted_row_length<Staged>(element, max_cluster));
  return s.n <= longest;
}

// Norm inputs are drawn uniformly from a range.
struct ValueRange {
  float lo, hi;
};

// The norm tests' input ranges for `dt`: ordinary, huge, tiny, and offset far from the origin
// compared with the spread (where E[x²] − E[x]² would cancel). NOTE: f16 tops out at 65504, so its
// "huge" is 3e4; bf16 and f32 go to 1e15 (squares summed over 262144 values stay finite in f32).
inline std::array<ValueRange, 4> norm_value_ranges(DType dt) {
  const float huge = dt == DType::F16 ? 3e4f : 1e15f;
  const float tiny = dt == DType::F16 ? 1e-3f : 1e-20f;
  return {{{-2.0f, 2.0f}, {-huge, huge}, {-tiny, tiny}, {100.0f, 104.0f}}};
}

// Softmax logits: random values in [-magnitude, magnitude], about 1 in 16 of them −∞, and row 1
// entirely −∞ (a fully masked row).
inline std::vector<double> random_logits(std::int64_t rows, std::int64_t n, double magnitude, std::uint64_t seed) {
  constexpr int kInfEvery = 16;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-magnitude, magnitude);
  std::vector<double> v(static_cast<std::size_t>(rows * n));
  for (auto& x : v) x = rng() % kInfEvery == 0 ? -INFINITY : value(rng);
  if (rows > 1)
    for (std::int64_t j = 0; j < n; ++j) v[static_cast<std::size_t>(n + j)] = -INFINITY;
  return v;
}

}  // namespace fusekit::testing
