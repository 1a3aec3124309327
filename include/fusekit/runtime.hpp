#pragma once
// Streams, events and device facts. A CUDA stream is passed to every entry as a plain
// cudaStream_t (non-owning); Stream owns one when the caller wants fusekit to create it.
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace fusekit {

class Stream {
 public:
  Stream();  // a non-blocking stream on the current device
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: usable wherever a stream is
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream);
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const Event& start) const;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Number of CUDA devices; 0 (never an exception) when there is no driver or device.
int device_count();
// Why there is no usable device, or "" when there is one.
std::string no_device_reason();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
  std::size_t smem_per_block_optin = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  std::string chip() const;  // CUPTI chip name, e.g. "GH100" for sm_90, "GA100" for sm_80
};

// The current device's facts, queried once per device; throws Error(NoDevice) without one.
const DeviceInfo& current_device_info();

// The CTAs of a grid-stride launch over `work` items, `threads` per CTA: one CTA per `threads`
// items, at most `ctas_per_sm` per SM of `sm_count`, and at least one.
int grid_stride_ctas(std::int64_t work, int threads, int ctas_per_sm, int sm_count);
// The same on the current device.
int grid_stride_ctas(std::int64_t work, int threads, int ctas_per_sm);

}  // namespace fusekit
