// SmPartitionStream: a stream on a green context of the driver, bound to a share of the SMs.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <fmt/format.h>

#include <memory>
#include <string>

#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"

namespace fusekit {

namespace {

// The driver API versions that brought the entries (cudaTypedefs.h: green contexts came with
// 12.4, their streams with 12.5).
constexpr unsigned int kDeviceApiVersion = 2000;
constexpr unsigned int kGreenContextApiVersion = 12040;
constexpr unsigned int kGreenStreamApiVersion = 12050;

// A driver entry point by name, through the runtime (fusekit links no libcuda).
template <class Fn>
Fn driver_entry(const char* name, unsigned int version) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &found),
             fmt::format("cudaGetDriverEntryPointByVersion({})", name));
  if (found != cudaDriverEntryPointSuccess || entry == nullptr)
    throw Error(ErrorKind::Unsupported, fmt::format("{}: not in this CUDA driver (green contexts need 12.5+)", name));
  return reinterpret_cast<Fn>(entry);
}

void check_driver(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS)
    throw Error(ErrorKind::Cuda, fmt::format("{} failed (CUresult {})", what, static_cast<int>(status)));
}

// The current device and its SMs as a driver resource.
struct DeviceSms {
  CUdevice device = 0;
  CUdevResource all{};
};

DeviceSms device_sms() {
  check_cuda(cudaFree(nullptr), "cudaFree(nullptr) (creates the primary context)");
  const auto get_device = driver_entry<PFN_cuDeviceGet_v2000>("cuDeviceGet", kDeviceApiVersion);
  const auto get_resource =
      driver_entry<PFN_cuDeviceGetDevResource_v12040>("cuDeviceGetDevResource", kGreenContextApiVersion);
  DeviceSms d;
  check_driver(get_device(&d.device, current_device_info().index), "cuDeviceGet");
  check_driver(get_resource(d.device, &d.all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  return d;
}

// One group of at least `sms` of the device's SMs as the driver splits them (it rounds a request
// up to its granularity: on sm_90 a multiple of 8), or an invalid resource where it grants none.
CUdevResource split_off(const DeviceSms& d, int sms) {
  const auto split =
      driver_entry<PFN_cuDevSmResourceSplitByCount_v12040>("cuDevSmResourceSplitByCount", kGreenContextApiVersion);
  CUdevResource part{};
  unsigned int groups = 1;
  if (split(&part, &groups, &d.all, nullptr, 0, static_cast<unsigned int>(sms)) != CUDA_SUCCESS || groups != 1)
    part.type = CU_DEV_RESOURCE_TYPE_INVALID;
  return part;
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
      reinterpret_cast<PFN_cuGreenCtxDestroy_v12040>(entry)(handle);
  }
};

int SmPartitionStream::granted_sms(int sms) {
  require(sms > 0, "sms", "> 0", sms);
  const DeviceSms d = device_sms();
  if (sms > static_cast<int>(d.all.sm.smCount)) return 0;
  const CUdevResource part = split_off(d, sms);
  return part.type == CU_DEV_RESOURCE_TYPE_SM ? static_cast<int>(part.sm.smCount) : 0;
}

SmPartitionStream::SmPartitionStream(int sms) {
  require(sms > 0, "sms", "> 0", sms);
  const DeviceSms d = device_sms();
  const int device_sms_count = static_cast<int>(d.all.sm.smCount);
  require(sms <= device_sms_count, "sms", fmt::format("at most the GPU's {} SMs", device_sms_count), sms);
  CUdevResource part = split_off(d, sms);
  const int granted = part.type == CU_DEV_RESOURCE_TYPE_SM ? static_cast<int>(part.sm.smCount) : 0;
  require(granted == sms, "sms", "a partition the driver grants whole (its green contexts' granularity)",
          fmt::format("{} (granted {} SMs for it)", sms, granted));
  const auto generate_desc =
      driver_entry<PFN_cuDevResourceGenerateDesc_v12040>("cuDevResourceGenerateDesc", kGreenContextApiVersion);
  const auto create = driver_entry<PFN_cuGreenCtxCreate_v12040>("cuGreenCtxCreate", kGreenContextApiVersion);
  const auto create_stream =
      driver_entry<PFN_cuGreenCtxStreamCreate_v12050>("cuGreenCtxStreamCreate", kGreenStreamApiVersion);
  CUdevResourceDesc desc = nullptr;
  check_driver(generate_desc(&desc, &part, 1), "cuDevResourceGenerateDesc");
  auto context = std::make_unique<GreenContext>();
  check_driver(create(&context->handle, desc, d.device, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
  CUstream stream = nullptr;
  check_driver(create_stream(&stream, context->handle, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
  stream_ = stream;
  context_ = context.release();
  sms_ = sms;
}

SmPartitionStream::~SmPartitionStream() {
  if (stream_) {
    // The context's SMs are released with it: no kernel of the stream may still run then.
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  delete context_;
}

}  // namespace fusekit
