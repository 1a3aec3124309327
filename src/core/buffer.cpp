#include <fmt/format.h>

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
  view_ = TensorView::contiguous(nullptr, dtype, shape);
  for (int d = 0; d < view_.rank; ++d)
    require(view_.shape[d] >= 0, fmt::format("shape[{}]", d), ">= 0", view_.shape[d]);
  buffer_ = DeviceBuffer(static_cast<std::size_t>(view_.numel()) * dtype_size(dtype));
  view_.data = buffer_.data();
}

}  // namespace fusekit
