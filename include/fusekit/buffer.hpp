#pragma once
// Owning device memory (RAII, move-only) and a tensor that owns its storage.
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "fusekit/tensor.hpp"

namespace fusekit {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);  // cudaMalloc; throws on failure
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A packed row-major tensor that owns its device memory.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(DType dtype, std::initializer_list<std::int64_t> shape);
  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }  // NOLINT: a tensor is usable as its view
  void* data() const { return view_.data; }
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
  TensorView view_;
};

}  // namespace fusekit
