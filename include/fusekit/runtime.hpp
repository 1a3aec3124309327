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

// A stream whose kernels run on `sms` of the current device's SMs and no others (a green context
// of the driver): set_sm_limit caps how many CTAs a grid runs at once, this also bounds which SMs
// they take, so that an H100 on N SMs moves another GPU's bytes per SM, or a kernel runs on the
// SMs a concurrent one leaves. `sms` must be a partition the driver grants whole (sm_90: a
// multiple of 8; granted_sms says): Error(InvalidArgument) names what it grants instead,
// Error(NoDevice) without a device, Error(Unsupported) on a driver before CUDA 12.5.
// NOTE: the driver may add SMs to a green context (CUDA dynamic parallelism, MPS), never take
// any; a cluster wider than the partition's share of a GPC fails at its launch.
class SmPartitionStream {
 public:
  explicit SmPartitionStream(int sms);
  ~SmPartitionStream();
  SmPartitionStream(const SmPartitionStream&) = delete;
  SmPartitionStream& operator=(const SmPartitionStream&) = delete;
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: usable wherever a stream is
  int sms() const { return sms_; }

  // The SMs the driver grants for a request of `sms` on the current device (it rounds up to its
  // granularity), or 0 where it grants none (more than the device has).
  static int granted_sms(int sms);

 private:
  struct GreenContext;  // the driver's handle, kept out of this header (cuda.h)
  GreenContext* context_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
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
  int sm_count = 0;         // the SMs fusekit's kernels size their grids for (set_sm_limit)
  int device_sm_count = 0;  // the device's own
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

// Caps the SMs that fusekit's kernels size their grids for, on every device, at `sms` (0: no cap):
// the persistent and grid-stride launches and the Hopper GEMMs' tile schedulers then run at most
// that many SMs' worth of CTAs at once (a cluster at the least), so work on other streams (a
// communication kernel) keeps the rest. A cap above a device's SM count changes nothing there;
// cuBLASLt's kernels are not capped. Set it between launches, not while other threads launch.
// Throws Error(InvalidArgument) for a negative count.
// NOTE: the cap bounds how many CTAs run at once, not which SMs they take.
void set_sm_limit(int sms);
// The cap set_sm_limit set (0: none).
int sm_limit();

// The CTAs of a grid-stride launch over `work` items, `threads` per CTA: one CTA per `threads`
// items, at most `ctas_per_sm` per SM of `sm_count`, and at least one.
int grid_stride_ctas(std::int64_t work, int threads, int ctas_per_sm, int sm_count);
// The same on the current device.
int grid_stride_ctas(std::int64_t work, int threads, int ctas_per_sm);

}  // namespace fusekit
