#pragma once
// TensorView: a non-owning view of device memory (pointer, dtype, shape, strides in elements),
// and the checks every public entry runs on its arguments before any launch.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "fusekit/dtype.hpp"

namespace fusekit {

inline constexpr int kMaxRank = 4;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};    // outermost first
  std::array<std::int64_t, kMaxRank> strides{};  // in elements, outermost first

  // Row-major tensor with packed strides.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape);
  // Row-major matrix [rows, cols] whose rows are `row_stride` elements apart.
  static TensorView matrix(void* data, DType dtype, std::int64_t rows, std::int64_t cols,
                           std::int64_t row_stride);
  // Batch of row-major matrices [batch, rows, cols], `batch_stride` elements apart.
  static TensorView batched(void* data, DType dtype, std::int64_t batch, std::int64_t rows,
                            std::int64_t cols, std::int64_t row_stride, std::int64_t batch_stride);

  bool empty() const { return data == nullptr; }
  std::int64_t numel() const;
  std::int64_t size(int dim) const { return shape[normalize(dim)]; }
  std::int64_t stride(int dim) const { return strides[normalize(dim)]; }
  bool is_contiguous() const;
  std::size_t element_size() const { return dtype_size(dtype); }
  // Bytes from the first to one past the last element reachable through the strides.
  std::size_t span_bytes() const;
  std::string describe() const;  // e.g. "bf16[4096, 4096] strides [4096, 1]"

 private:
  int normalize(int dim) const { return dim < 0 ? dim + rank : dim; }
};

// Argument checks. Each throws fusekit::Error(InvalidArgument) naming `arg` with the expected
// and actual values. They read nothing through the pointer.
namespace check {

// Whether an op may write an output over an input read through the identical view.
enum class InPlace : std::uint8_t { Forbidden, Allowed };

void not_null(std::string_view arg, const TensorView& t);
void dtype(std::string_view arg, const TensorView& t, std::initializer_list<DType> allowed);
void rank(std::string_view arg, const TensorView& t, int expected);
// `dims` uses -1 for "any"; the rank must match.
void shape(std::string_view arg, const TensorView& t, std::initializer_list<std::int64_t> dims);
void same_shape(std::string_view arg, const TensorView& t, std::string_view other_arg,
                const TensorView& other);
// Innermost stride 1 and every other stride at least the extent it spans (no overlap).
void inner_contiguous(std::string_view arg, const TensorView& t);
// Base address and every non-unit stride (in bytes) divisible by `bytes`.
void aligned(std::string_view arg, const TensorView& t, std::size_t bytes);
// The bytes `t` spans (span_bytes) and those `other` spans are disjoint, or, where `in_place` is
// Allowed, the two are the same view (address, dtype, shape and strides). Empty views pass.
// NOTE: spans, not elements: two views interleaving rows of one buffer are rejected too.
void disjoint(std::string_view arg, const TensorView& t, std::string_view other_arg,
              const TensorView& other, InPlace in_place);
// An argument's name and its view, for the checks across an op's arguments.
using NamedView = std::pair<std::string_view, const TensorView*>;
// disjoint(arg, t, …, InPlace::Forbidden) against each of `others`: an output that may share no
// byte with any of them.
void disjoint_from_each(std::string_view arg, const TensorView& t, std::initializer_list<NamedView> others);
// The view of the one f32 a raw pointer argument passes (a scale, an amax); empty where it is null.
TensorView scalar_view(const float* data);
// The pointer is device memory usable by the current device.
void on_current_device(std::string_view arg, const void* data);
void on_current_device(std::string_view arg, const TensorView& t);

// Non-null, aligned to its element, non-negative shape, inner-contiguous, a span of bytes that
// fits in 63 bits: everything checkable without a device.
void structure(std::string_view arg, const TensorView& t);
// The common bundle: structure(), then on_current_device().
void device_tensor(std::string_view arg, const TensorView& t);

}  // namespace check
}  // namespace fusekit
