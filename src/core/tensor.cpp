#include "fusekit/tensor.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <span>
#include <vector>

#include "fusekit/error.hpp"

namespace fusekit {

namespace {
std::string dims_string(std::span<const std::int64_t> dims) {
  std::vector<std::string> parts;
  for (auto d : dims) parts.push_back(d < 0 ? "*" : std::to_string(d));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}
}  // namespace

TensorView TensorView::contiguous(void* data, DType dtype,
                                  std::initializer_list<std::int64_t> shape) {
  require(shape.size() >= 1 && shape.size() <= kMaxRank, "shape", "rank 1..4", shape.size());
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (auto d : shape) t.shape[i++] = d;
  std::int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.strides[d] = s;
    s *= t.shape[d];
  }
  return t;
}

TensorView TensorView::matrix(void* data, DType dtype, std::int64_t rows, std::int64_t cols,
                              std::int64_t row_stride) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.rank = 2;
  t.shape = {rows, cols, 0, 0};
  t.strides = {row_stride, 1, 0, 0};
  return t;
}

TensorView TensorView::batched(void* data, DType dtype, std::int64_t batch, std::int64_t rows,
                               std::int64_t cols, std::int64_t row_stride,
                               std::int64_t batch_stride) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.rank = 3;
  t.shape = {batch, rows, cols, 0};
  t.strides = {batch_stride, row_stride, 1, 0};
  return t;
}

std::int64_t TensorView::numel() const {
  if (rank == 0) return 0;
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  std::int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

std::size_t TensorView::span_bytes() const {
  if (numel() == 0) return 0;
  std::int64_t last = 0;
  for (int d = 0; d < rank; ++d) last += (shape[d] - 1) * strides[d];
  return static_cast<std::size_t>(last + 1) * element_size();
}

std::string TensorView::describe() const {
  return fmt::format("{}{} strides {}", dtype_name(dtype),
                     dims_string({shape.data(), static_cast<std::size_t>(rank)}),
                     dims_string({strides.data(), static_cast<std::size_t>(rank)}));
}

namespace check {

namespace {
// [begin, end) of the bytes a view reaches, negative strides included.
struct ByteRange {
  std::uintptr_t begin, end;
};
ByteRange byte_range(const TensorView& t) {
  std::int64_t low = 0, high = 0;
  for (int d = 0; d < t.rank; ++d) {
    const std::int64_t reach = (t.shape[d] - 1) * t.strides[d];
    if (t.shape[d] == 0) return {0, 0};  // no elements: nothing to overlap
    if (reach < 0) low += reach;
    else high += reach;
  }
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  const auto element = static_cast<std::int64_t>(t.element_size());
  return {addr + static_cast<std::uintptr_t>(low * element), addr + static_cast<std::uintptr_t>((high + 1) * element)};
}
}  // namespace

void not_null(std::string_view arg, const TensorView& t) {
  require(t.data != nullptr, arg, "a non-null device pointer", "null");
}

void dtype(std::string_view arg, const TensorView& t, std::initializer_list<DType> allowed) {
  for (auto d : allowed)
    if (t.dtype == d) return;
  std::vector<std::string_view> names;
  for (auto d : allowed) names.push_back(dtype_name(d));
  throw_invalid(fmt::format("{} dtype", arg), fmt::format("{}", fmt::join(names, " or ")),
                dtype_name(t.dtype));
}

void rank(std::string_view arg, const TensorView& t, int expected) {
  require(t.rank == expected, fmt::format("{} rank", arg), expected, t.rank);
}

void shape(std::string_view arg, const TensorView& t, std::initializer_list<std::int64_t> dims) {
  std::vector<std::int64_t> want(dims);
  bool ok = t.rank == static_cast<int>(want.size());
  for (int d = 0; ok && d < t.rank; ++d) ok = want[d] < 0 || want[d] == t.shape[d];
  for (int d = 0; d < t.rank; ++d) ok = ok && t.shape[d] >= 0;
  require(ok, fmt::format("{} shape", arg), dims_string(want),
          dims_string({t.shape.data(), static_cast<std::size_t>(t.rank)}));
}

void same_shape(std::string_view arg, const TensorView& t, std::string_view other_arg,
                const TensorView& other) {
  bool ok = t.rank == other.rank;
  for (int d = 0; ok && d < t.rank; ++d) ok = t.shape[d] == other.shape[d];
  require(ok, fmt::format("{} shape", arg),
          fmt::format("{} (the shape of {})",
                      dims_string({other.shape.data(), static_cast<std::size_t>(other.rank)}),
                      other_arg),
          dims_string({t.shape.data(), static_cast<std::size_t>(t.rank)}));
}

void inner_contiguous(std::string_view arg, const TensorView& t) {
  if (t.rank == 0) return;
  require(t.strides[t.rank - 1] == 1 || t.shape[t.rank - 1] == 1,
          fmt::format("{} innermost stride", arg), 1, t.strides[t.rank - 1]);
  std::int64_t extent = t.shape[t.rank - 1];
  for (int d = t.rank - 2; d >= 0; --d) {
    if (t.shape[d] > 1)
      require(t.strides[d] >= extent, fmt::format("{} stride[{}]", arg, d),
              fmt::format(">= {} (no overlapping rows)", extent), t.strides[d]);
    // Saturated: a view past 64 bits is refused by structure()'s span check.
    std::int64_t reach = 0;
    if (__builtin_mul_overflow(t.strides[d], t.shape[d] - 1, &reach) || __builtin_add_overflow(reach, extent, &reach))
      reach = INT64_MAX;
    extent = std::max(extent, reach);
  }
}

void aligned(std::string_view arg, const TensorView& t, std::size_t bytes) {
  auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  require(addr % bytes == 0, fmt::format("{} address", arg),
          fmt::format("a multiple of {} bytes", bytes), fmt::format("{:#x}", addr));
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] <= 1 || t.strides[d] == 1) continue;
    auto stride_bytes = static_cast<std::size_t>(t.strides[d]) * t.element_size();
    require(stride_bytes % bytes == 0, fmt::format("{} stride[{}] in bytes", arg, d),
            fmt::format("a multiple of {}", bytes), stride_bytes);
  }
}

void disjoint(std::string_view arg, const TensorView& t, std::string_view other_arg,
              const TensorView& other, InPlace in_place) {
  if (t.empty() || other.empty()) return;
  bool same_view = t.data == other.data && t.dtype == other.dtype && t.rank == other.rank;
  // A dimension of extent 1 never moves an address: its stride is not part of the view.
  for (int d = 0; same_view && d < t.rank; ++d)
    same_view = t.shape[d] == other.shape[d] && (t.shape[d] <= 1 || t.strides[d] == other.strides[d]);
  if (in_place == InPlace::Allowed && same_view) return;
  const ByteRange range = byte_range(t), other_range = byte_range(other);
  const bool apart = range.end <= other_range.begin || other_range.end <= range.begin;
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data);
  const auto other_begin = reinterpret_cast<std::uintptr_t>(other.data);
  require(apart, arg,
          in_place == InPlace::Allowed
              ? fmt::format("memory disjoint from {}, or {}'s exact view (in place)", other_arg, other_arg)
              : fmt::format("memory disjoint from {}", other_arg),
          fmt::format("{} at {:#x} overlapping {} at {:#x}", t.describe(), begin, other.describe(), other_begin));
}

void disjoint_from_each(std::string_view arg, const TensorView& t, std::initializer_list<NamedView> others) {
  for (const auto& [other_arg, other] : others) disjoint(arg, t, other_arg, *other, InPlace::Forbidden);
}

TensorView scalar_view(const float* data) {
  if (data == nullptr) return {};
  // The view is only compared (disjoint) and described; nothing writes through it.
  return TensorView::contiguous(const_cast<float*>(data), DType::F32, {1});
}

void on_current_device(std::string_view arg, const TensorView& t) { on_current_device(arg, t.data); }

void on_current_device(std::string_view arg, const void* data) {
  cudaPointerAttributes attr{};
  cudaError_t st = cudaPointerGetAttributes(&attr, data);
  if (st != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state for the caller
    // No device, or no driver for one, is not the argument's fault: ErrorKind::NoDevice.
    if (st == cudaErrorNoDevice || st == cudaErrorInsufficientDriver) check_cuda(st, fmt::format("{} pointer", arg));
    throw_invalid(fmt::format("{} pointer", arg), "device memory",
                  fmt::format("a pointer CUDA does not know ({})", cudaGetErrorString(st)));
  }
  require(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged,
          fmt::format("{} pointer", arg), "device or managed memory",
          attr.type == cudaMemoryTypeHost ? "pinned host memory" : "unregistered host memory");
  int current = 0;
  check_cuda(cudaGetDevice(&current), "cudaGetDevice");
  require(attr.type == cudaMemoryTypeManaged || attr.device == current,
          fmt::format("{} device", arg), current, attr.device);
}

void structure(std::string_view arg, const TensorView& t) {
  not_null(arg, t);
  require(t.element_size() != 0, fmt::format("{} dtype", arg), "a DType", static_cast<int>(t.dtype));
  // Every access, scalar ones included, is of whole elements.
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  require(addr % t.element_size() == 0, fmt::format("{} address", arg),
          fmt::format("a multiple of {} bytes (the size of {})", t.element_size(), dtype_name(t.dtype)),
          fmt::format("{:#x}", addr));
  for (int d = 0; d < t.rank; ++d)
    require(t.shape[d] >= 0, fmt::format("{} shape[{}]", arg, d), ">= 0", t.shape[d]);
  // Every later check (spans, overlaps) and every kernel's offsets compute in 64 bits.
  std::int64_t reach = 0;
  bool fits = true;
  for (int d = 0; d < t.rank && fits; ++d) {
    std::int64_t step = 0;
    if (t.shape[d] > 0) fits = !__builtin_mul_overflow(t.shape[d] - 1, t.strides[d], &step);
    fits = fits && step != INT64_MIN && !__builtin_add_overflow(reach, step < 0 ? -step : step, &reach);
  }
  std::int64_t bytes = 0;
  fits = fits && !__builtin_add_overflow(reach, 1, &reach) &&
         !__builtin_mul_overflow(reach, static_cast<std::int64_t>(t.element_size()), &bytes);
  require(fits, fmt::format("{} span", arg), "at most 2^63 - 1 bytes from its first element to its last",
          t.describe());
  inner_contiguous(arg, t);
}

void device_tensor(std::string_view arg, const TensorView& t) {
  structure(arg, t);
  on_current_device(arg, t);
}

}  // namespace check
}  // namespace fusekit
