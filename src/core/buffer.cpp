#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fusekit/buffer.hpp"

#include <cuda_runtime_api.h>

#include <utility>

#include "fusekit/error.hpp"

namespace fusekit {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMalloc(&data_, bytes), fmt::format("cudaMalloc of {} bytes", bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);  // NOTE: no throw from a destructor; a failed free is unrecoverable
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceTensor::DeviceTensor(DType dtype, std::initializer_list<std::int64_t> shape) {
  // Checked before the view's strides are multiplied out.
  auto bytes = static_cast<std::int64_t>(dtype_size(dtype));
  int d = 0;
  for (const std::int64_t extent : shape) {
    require(extent >= 0, fmt::format("shape[{}]", d++), ">= 0", extent);
    require(!__builtin_mul_overflow(bytes, extent, &bytes), "shape", "at most 2^63 - 1 bytes in all",
            fmt::format("[{}] of {}", fmt::join(shape, ", "), dtype_name(dtype)));
  }
  view_ = TensorView::contiguous(nullptr, dtype, shape);
  buffer_ = DeviceBuffer(static_cast<std::size_t>(bytes));
  view_.data = buffer_.data();
}

}  // namespace fusekit
