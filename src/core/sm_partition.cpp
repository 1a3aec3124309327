// SmPartitionStream: a stream on a green context of the driver, bound to a share of the SMs.
#include <cuda.h>
#include <fmt/format.h>

#include <memory>
#include <string>

#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"

namespace fusekit {

namespace {

// Green contexts came with the driver API of CUDA 12.4; their ABI is unchanged in 13.
constexpr unsigned int kGreenContextApiVersion = 12040;

// A driver entry point by name, through the runtime (fusekit links no libcuda).
template <class Fn>
Fn driver_entry(const char* name) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(cudaGetDriverEntryPointByVersion(name, &entry, kGreenContextApiVersion, cudaEnableDefault, &found),
             fmt::format("cudaGetDriverEntryPointByVersion({})", name));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr)
    throw Error(ErrorKind::Unsupported, fmt::format("{}: not in this CUDA driver (green contexts need 12.4+)", name));
  return reinterpret_cast<Fn>(entry);
}

void check_driver(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS)
    throw Error(ErrorKind::Cuda, fmt::format("{} failed (CUresult {})", what, static_cast<int>(status)));
}

// The current device's SMs as a driver resource.
CUdevResource device_sms(CUdevice& device) {
  check_cuda(cudaFree(nullptr), "cudaFree(nullptr) (creates the primary context)");
  const auto get_device = driver_entry<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  const auto get_resource =
      driver_entry<CUresult (*)(CUdevice, CUdevResource*, CUdevResourceType)>("cuDeviceGetDevResource");
  check_driver(get_device(&device, current_device_info().index), "cuDeviceGet");
  CUdevResource sms{};
  check_driver(get_resource(device, &sms, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  return sms;
}

}  // namespace

// Owns the green context; destroyed after the stream made on it.
struct SmPartitionStream::GreenContext {
  CUgreenCtx handle = nullptr;
  ~GreenContext() {
    if (!handle) return;
    // NOTE: no throw from a destructor: a driver without the entry leaves the context to the exit.
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuGreenCtxDestroy", &entry, kGreenContextApiVersion, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess && entry != nullptr)
      reinterpret_cast<CUresult (*)(CUgreenCtx)>(entry)(handle);
  }
};

SmPartitionStream::Sizes SmPartitionStream::sizes() {
  CUdevice device = 0;
  const CUdevResource all = device_sms(device);
  return {static_cast<int>(all.sm.minSmPartitionSize), static_cast<int>(all.sm.smCoscheduledAlignment),
          static_cast<int>(all.sm.smCount)};
}

SmPartitionStream::SmPartitionStream(int sms) {
  require(sms > 0, "sms", "> 0", sms);
  CUdevice device = 0;
  const CUdevResource all = device_sms(device);
  const int min_sms = static_cast<int>(all.sm.minSmPartitionSize);
  const int alignment = static_cast<int>(all.sm.smCoscheduledAlignment);
  const int device_sms_count = static_cast<int>(all.sm.smCount);
  require(sms >= min_sms && sms <= device_sms_count && alignment > 0 && sms % alignment == 0, "sms",
          fmt::format("a multiple of {} from {} to the GPU's {} SMs (its green-context partitions)", alignment,
                      min_sms, device_sms_count),
          sms);
  const auto split = driver_entry<CUresult (*)(CUdevResource*, unsigned int*, const CUdevResource*, CUdevResource*,
                                               unsigned int, unsigned int)>("cuDevSmResourceSplitByCount");
  const auto generate_desc =
      driver_entry<CUresult (*)(CUdevResourceDesc*, CUdevResource*, unsigned int)>("cuDevResourceGenerateDesc");
  const auto create =
      driver_entry<CUresult (*)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int)>("cuGreenCtxCreate");
  const auto create_stream =
      driver_entry<CUresult (*)(CUstream*, CUgreenCtx, unsigned int, int)>("cuGreenCtxStreamCreate");
  CUdevResource part{};
  unsigned int groups = 0;
  // NOTE: the row kernels launch clusters of up to 16 CTAs: first ask for a group that keeps
  // them, then for any group of the size.
  for (const unsigned int flags : {unsigned{CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE}, 0u}) {
    groups = 1;
    if (split(&part, &groups, &all, nullptr, flags, static_cast<unsigned int>(sms)) == CUDA_SUCCESS && groups == 1 &&
        part.sm.smCount == static_cast<unsigned int>(sms))
      break;
    groups = 0;
  }
  require(groups == 1, "sms", "a partition the driver grants whole", sms);
  CUdevResourceDesc desc = nullptr;
  check_driver(generate_desc(&desc, &part, 1), "cuDevResourceGenerateDesc");
  auto context = std::make_unique<GreenContext>();
  check_driver(create(&context->handle, desc, device, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
  CUstream stream = nullptr;
  check_driver(create_stream(&stream, context->handle, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
  stream_ = stream;
  context_ = context.release();
  sms_ = sms;
}

SmPartitionStream::~SmPartitionStream() {
  if (stream_) cudaStreamDestroy(stream_);
  delete context_;
}

}  // namespace fusekit
