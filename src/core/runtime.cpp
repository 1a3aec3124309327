#include <fmt/format.h>

#include "fusekit/runtime.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>

#include "fusekit/error.hpp"

namespace fusekit {

Stream::Stream() {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void Stream::synchronize() const { check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

Event::Event() { check_cuda(cudaEventCreate(&event_), "cudaEventCreate"); }
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) {
  check_cuda(cudaEventRecord(event_, stream), "cudaEventRecord");
}
float Event::elapsed_ms_since(const Event& start) const {
  check_cuda(cudaEventSynchronize(event_), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start.event_, event_), "cudaEventElapsedTime");
  return ms;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  cudaError_t st = cudaGetDeviceCount(&n);
  if (st != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no usable CUDA device ({})", cudaGetErrorString(st));
  }
  return n == 0 ? "no CUDA device on this machine" : "";
}

std::string DeviceInfo::chip() const {
  if (cc_major == 9 && cc_minor == 0) return "GH100";
  if (cc_major == 8 && cc_minor == 0) return "GA100";
  if (cc_major == 8 && cc_minor == 6) return "GA102";
  if (cc_major == 8 && cc_minor == 9) return "AD102";
  if (cc_major == 10 && cc_minor == 0) return "GB100";
  return fmt::format("sm_{}{}", cc_major, cc_minor);
}

namespace {
DeviceInfo query_device_info(int index) {
  DeviceInfo info;
  info.index = index;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, info.index), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.device_sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.memory_bytes = prop.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, info.index);
  cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, info.index);
  cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, info.index);
  return info;
}

// NOTE: cudaGetDeviceProperties takes about a millisecond; dispatch asks per call, so the answer
// is cached per device, with set_sm_limit's cap applied to every entry.
constexpr int kMaxDevices = 64;
struct DeviceCache {
  std::array<std::optional<DeviceInfo>, kMaxDevices> slots;
  std::mutex mutex;
  int sm_limit = 0;
};
DeviceCache& device_cache() {
  static DeviceCache cache;
  return cache;
}
int capped_sms(int device_sms, int limit) { return limit > 0 ? std::min(device_sms, limit) : device_sms; }
}  // namespace

const DeviceInfo& current_device_info() {
  if (auto why = no_device_reason(); !why.empty()) throw Error(ErrorKind::NoDevice, why);
  int index = 0;
  check_cuda(cudaGetDevice(&index), "cudaGetDevice");
  require(index < kMaxDevices, "device index", fmt::format("< {}", kMaxDevices), index);
  DeviceCache& cache = device_cache();
  std::lock_guard lock(cache.mutex);
  auto& slot = cache.slots[static_cast<std::size_t>(index)];
  if (!slot) {
    slot = query_device_info(index);
    slot->sm_count = capped_sms(slot->device_sm_count, cache.sm_limit);
  }
  return *slot;
}

void set_sm_limit(int sms) {
  require(sms >= 0, "sms", ">= 0 (0: no cap)", sms);
  DeviceCache& cache = device_cache();
  std::lock_guard lock(cache.mutex);
  cache.sm_limit = sms;
  for (auto& slot : cache.slots)
    if (slot) slot->sm_count = capped_sms(slot->device_sm_count, sms);
}

int sm_limit() {
  DeviceCache& cache = device_cache();
  std::lock_guard lock(cache.mutex);
  return cache.sm_limit;
}

int grid_stride_ctas(std::int64_t work, int threads, int ctas_per_sm, int sm_count) {
  const std::int64_t wanted = (work + threads - 1) / threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min(wanted, std::int64_t{sm_count} * ctas_per_sm)));
}

int grid_stride_ctas(std::int64_t work, int threads, int ctas_per_sm) {
  return grid_stride_ctas(work, threads, ctas_per_sm, current_device_info().sm_count);
}

}  // namespace fusekit
