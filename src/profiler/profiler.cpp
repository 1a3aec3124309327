// fusekit::verify::Profiler: per-kernel counters from the CUPTI Range Profiler.
//
// A call to profile() runs the work twice:
//   1. trace: CUPTI kernel activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) give every
//      kernel's name, registers and local bytes per thread, in execution order;
//   2. counters: the range profiler in auto-range mode (one range per kernel) with kernel replay
//      and a one-pass configuration gives the metrics of verify.hpp's kMetrics per range.
// Ranges carry only numbers in auto-range mode, so range i is the i-th kernel of the trace; both
// passes launch the same kernels, L2 sweeps included, and the counts are checked to agree.
//
// NOTE: the two are separate passes rather than one because CUPTI documents each alone, not
// their interplay, and the second run costs little next to a misattributed counter.
//
// NOTE on flushing. With kernel replay CUPTI replays a kernel only when the configuration needs
// several passes, restoring device memory between passes; a restore leaves L2 holding the
// restored buffers, not cold. fusekit's configuration is one pass (checked), so each kernel runs
// exactly once and nothing flushes L2 between the kernels of one run: a flush is not inherent to
// replay. fusekit flushes itself. In Flush::EachKernel a CUPTI launch callback (runtime and
// driver launch APIs, API_ENTER) puts a sweep kernel on the launching stream just before every
// kernel; one more sweep follows the run. The sweep reads a zeroed buffer 4× the L2's size and
// writes nothing, so (a) the next kernel starts with none of the work's data in L2, and (b) the
// DRAM writes inside the sweep's own range are exactly the dirty lines the previous kernel left
// in L2, which fusekit adds to that kernel as dram_writeback_bytes. A memset flush (as the
// benchmark harness uses) would do (a) but hide (b) outside every range.
#include <cuda.h>
#include <cupti.h>  // with the launch parameter structs (generated_*_meta.h)
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "cupti_status.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/l2_sweep.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/verify.hpp"
#include "host_object.hpp"

namespace fusekit::verify {

namespace {

using detail::check_cupti;

// NOTE: reading 4× the L2 evicts it under any replacement policy that favours neither the
// sweep's lines nor the work's; 2× (the timing harness's factor, for a memset that dirties every
// line) leaves a measurable remainder when the sweep only reads.
constexpr std::size_t kSweepL2Multiple = 4;
constexpr std::size_t kActivityBufferBytes = std::size_t{8} << 20;
constexpr std::size_t kActivityBufferAlignment = 8;
constexpr std::size_t kSpareRanges = 16;  // counter data room beyond the traced kernel count
constexpr double kSecondsPerNanosecond = 1e-9;
constexpr unsigned int kDriverApiVersion = 12000;  // the cuCtxGetCurrent ABI of CUDA 12 and 13

std::atomic<bool> g_profiler_alive{false};

// ---- Kernel activity records (process-wide: CUPTI calls plain functions) ----

struct KernelRecord {
  std::string name;
  std::uint64_t start = 0;
  std::uint32_t correlation = 0;
  int registers = 0;
  std::int64_t local_bytes = 0;
};

std::mutex g_records_mutex;
std::vector<KernelRecord> g_records;

std::string demangle(const char* name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && readable ? readable : name;
  std::free(readable);
  return out;
}

void CUPTIAPI activity_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                        std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(
      std::aligned_alloc(kActivityBufferAlignment, kActivityBufferBytes));
  *size = *buffer ? kActivityBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI activity_buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                        std::size_t valid_bytes) {
  {
    std::lock_guard lock(g_records_mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
        continue;
      }
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      g_records.push_back(KernelRecord{k->name ? demangle(k->name) : std::string("?"), k->start,
                                       k->correlationId, k->registersPerThread,
                                       static_cast<std::int64_t>(k->localMemoryPerThread)});
    }
  }
  std::free(buffer);
}

void register_activity_buffers() {
  static std::once_flag once;
  std::call_once(once, [] {
    check_cupti(
        cuptiActivityRegisterCallbacks(activity_buffer_requested, activity_buffer_completed),
        "cuptiActivityRegisterCallbacks");
  });
}

// ---- Sweeps before every kernel, from a launch callback ----

struct SweepState {
  const void* buffer = nullptr;
  std::size_t bytes = 0;
  unsigned int* sink = nullptr;
  int blocks = 0;
  std::atomic<bool> armed{false};
  std::mutex error_mutex;
  std::string error;  // the first failed sweep launch; a callback must not throw
};

// NOTE: a sweep launched from a callback is itself a launch that raises callbacks; this flag
// makes them no-ops. A runtime launch also raises the driver launch it makes: the depth counter
// keeps that from adding a second sweep.
thread_local bool t_launching_sweep = false;
thread_local int t_runtime_launch_depth = 0;

void sweep(SweepState& state, cudaStream_t stream) {
  t_launching_sweep = true;
  const cudaError_t status =
      launch_l2_sweep(state.buffer, state.bytes, state.sink, state.blocks, stream);
  t_launching_sweep = false;
  if (status != cudaSuccess) {
    std::lock_guard lock(state.error_mutex);
    if (state.error.empty()) state.error = cudaGetErrorString(status);
  }
}

// The per-thread default stream when a _ptsz launch names stream 0.
cudaStream_t stream_or_per_thread(cudaStream_t stream, bool per_thread) {
  return stream == nullptr && per_thread ? cudaStreamPerThread : stream;
}

std::optional<cudaStream_t> runtime_launch_stream(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      return static_cast<const cudaLaunchKernel_v7000_params*>(params)->stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      return stream_or_per_thread(
          static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(params)->stream, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      return static_cast<const cudaLaunchKernelExC_v11060_params*>(params)->config->stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      return stream_or_per_thread(
          static_cast<const cudaLaunchKernelExC_ptsz_v11060_params*>(params)->config->stream, true);
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      return static_cast<const cudaLaunchCooperativeKernel_v9000_params*>(params)->stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      return stream_or_per_thread(
          static_cast<const cudaLaunchCooperativeKernel_ptsz_v9000_params*>(params)->stream, true);
    default: return std::nullopt;
  }
}

std::optional<cudaStream_t> driver_launch_stream(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return static_cast<const cuLaunchKernel_params*>(params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return stream_or_per_thread(static_cast<const cuLaunchKernel_ptsz_params*>(params)->hStream,
                                  true);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return static_cast<const cuLaunchKernelEx_params*>(params)->config->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return stream_or_per_thread(
          static_cast<const cuLaunchKernelEx_ptsz_params*>(params)->config->hStream, true);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return static_cast<const cuLaunchCooperativeKernel_params*>(params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return stream_or_per_thread(
          static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(params)->hStream, true);
    default: return std::nullopt;
  }
}

constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};

void CUPTIAPI on_launch(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const void* data) {
  if (t_launching_sweep) return;
  auto& state = *static_cast<SweepState*>(userdata);
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (call->callbackSite == CUPTI_API_EXIT) {
      --t_runtime_launch_depth;
      return;
    }
    const bool outermost = t_runtime_launch_depth++ == 0;
    const auto stream = runtime_launch_stream(cbid, call->functionParams);
    if (outermost && stream && state.armed) sweep(state, *stream);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || call->callbackSite != CUPTI_API_ENTER) return;
  if (t_runtime_launch_depth > 0) return;  // the runtime launch above already swept
  const auto stream = driver_launch_stream(cbid, call->functionParams);
  if (stream && state.armed) sweep(state, *stream);
}

// ---- The driver context the runtime made current ----

CUcontext current_context() {
  check_cuda(cudaFree(nullptr), "cudaFree(nullptr) (creates the primary context)");
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, kDriverApiVersion,
                                              cudaEnableDefault, &found),
             "cudaGetDriverEntryPointByVersion(cuCtxGetCurrent)");
  if (found != cudaDriverEntryPointSuccess || entry == nullptr) {
    throw Error(ErrorKind::Cuda, "cuCtxGetCurrent: not found in the CUDA driver");
  }
  CUcontext context = nullptr;
  const auto get_current = reinterpret_cast<CUresult (*)(CUcontext*)>(entry);
  if (get_current(&context) != CUDA_SUCCESS || context == nullptr) {
    throw Error(ErrorKind::Cuda, "cuCtxGetCurrent: no current context");
  }
  return context;
}

std::vector<std::uint8_t> counter_availability(CUcontext context) {
  auto params = detail::cupti_params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  params.ctx = context;
  check_cupti(cuptiProfilerGetCounterAvailability(&params),
              "cuptiProfilerGetCounterAvailability (size)");
  std::vector<std::uint8_t> image(params.counterAvailabilityImageSize);
  params.pCounterAvailabilityImage = image.data();
  check_cupti(cuptiProfilerGetCounterAvailability(&params), "cuptiProfilerGetCounterAvailability");
  image.resize(params.counterAvailabilityImageSize);
  return image;
}

// The range profiler enabled on a context, disabled on every way out.
class RangeProfiler {
 public:
  explicit RangeProfiler(CUcontext context) {
    auto params = detail::cupti_params<CUpti_RangeProfiler_Enable_Params>(
        CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    params.ctx = context;
    check_cupti(cuptiRangeProfilerEnable(&params), "cuptiRangeProfilerEnable");
    object_ = params.pRangeProfilerObject;
  }
  ~RangeProfiler() {
    auto params = detail::cupti_params<CUpti_RangeProfiler_Disable_Params>(
        CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    params.pRangeProfilerObject = object_;
    cuptiRangeProfilerDisable(&params);
  }
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;
  CUpti_RangeProfiler_Object* get() const { return object_; }

 private:
  CUpti_RangeProfiler_Object* object_ = nullptr;
};

}  // namespace

struct Profiler::Impl {
  Flush flush = Flush::EachKernel;
  DeviceInfo device;
  std::string chip;
  CUcontext context = nullptr;
  CounterConfig config;
  std::unique_ptr<detail::HostObject> host;
  DeviceBuffer sweep_buffer;
  DeviceBuffer sink;
  SweepState sweeps;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool initialized = false;  // cuptiProfilerInitialize succeeded

  // Undoes the constructor's CUPTI steps; the process may then make another Profiler.
  void release() {
    sweeps.armed = false;
    if (subscriber) cuptiUnsubscribe(subscriber);
    subscriber = nullptr;
    host.reset();
    if (initialized) {
      auto deinit = detail::cupti_params<CUpti_Profiler_DeInitialize_Params>(
          CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      cuptiProfilerDeInitialize(&deinit);
    }
    initialized = false;
    g_profiler_alive = false;
  }

  void sweep_now(cudaStream_t stream) {
    check_cuda(
        launch_l2_sweep(sweeps.buffer, sweeps.bytes, sweeps.sink, sweeps.blocks, stream),
        "launch of the L2 sweep");
  }

  // Runs `run` between sweeps; the callback adds one before each kernel in EachKernel.
  void run_swept(const std::function<void(cudaStream_t)>& run, cudaStream_t stream) {
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before profiling");
    if (flush == Flush::EachRun) sweep_now(stream);
    {
      std::lock_guard lock(sweeps.error_mutex);
      sweeps.error.clear();
    }
    sweeps.armed = flush == Flush::EachKernel;
    try {
      run(stream);
    } catch (...) {
      sweeps.armed = false;
      throw;
    }
    sweeps.armed = false;
    sweep_now(stream);
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the profiled work");
    std::lock_guard lock(sweeps.error_mutex);
    if (!sweeps.error.empty()) {
      throw Error(ErrorKind::Cuda,
                  fmt::format("L2 sweep launched before a kernel: {}", sweeps.error));
    }
  }

  std::vector<KernelRecord> trace(const std::function<void(cudaStream_t)>& run,
                                  cudaStream_t stream) {
    register_activity_buffers();
    {
      std::lock_guard lock(g_records_mutex);
      g_records.clear();
    }
    check_cupti(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                "cuptiActivityEnable(CONCURRENT_KERNEL)");
    try {
      run_swept(run, stream);
    } catch (...) {
      cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      throw;
    }
    check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    check_cupti(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                "cuptiActivityDisable(CONCURRENT_KERNEL)");
    std::vector<KernelRecord> records;
    {
      std::lock_guard lock(g_records_mutex);
      records.swap(g_records);
    }
    std::sort(records.begin(), records.end(), [](const KernelRecord& a, const KernelRecord& b) {
      return std::pair(a.start, a.correlation) < std::pair(b.start, b.correlation);
    });
    return records;
  }

  // Metric values per range, in kMetrics order (config.metrics), for `ranges` kernels.
  std::vector<std::vector<double>> count(const std::function<void(cudaStream_t)>& run,
                                         cudaStream_t stream, std::size_t ranges) {
    const RangeProfiler profiler(context);
    std::vector<const char*> names = detail::c_names(config.metrics);
    const std::size_t capacity = ranges + kSpareRanges;

    auto size = detail::cupti_params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    size.pRangeProfilerObject = profiler.get();
    size.pMetricNames = names.data();
    size.numMetrics = names.size();
    size.maxNumOfRanges = capacity;
    size.maxNumRangeTreeNodes = static_cast<std::uint32_t>(capacity);
    check_cupti(cuptiRangeProfilerGetCounterDataSize(&size),
                "cuptiRangeProfilerGetCounterDataSize");
    std::vector<std::uint8_t> counter_data(size.counterDataSize);

    auto init = detail::cupti_params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    init.pRangeProfilerObject = profiler.get();
    init.counterDataSize = counter_data.size();
    init.pCounterData = counter_data.data();
    check_cupti(cuptiRangeProfilerCounterDataImageInitialize(&init),
                "cuptiRangeProfilerCounterDataImageInitialize");

    auto set = detail::cupti_params<CUpti_RangeProfiler_SetConfig_Params>(
        CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    set.pRangeProfilerObject = profiler.get();
    set.configSize = config.image.size();
    set.pConfig = config.image.data();
    set.counterDataImageSize = counter_data.size();
    set.pCounterDataImage = counter_data.data();
    set.range = CUPTI_AutoRange;
    set.replayMode = CUPTI_KernelReplay;
    set.maxRangesPerPass = capacity;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    check_cupti(cuptiRangeProfilerSetConfig(&set), "cuptiRangeProfilerSetConfig");

    auto start = detail::cupti_params<CUpti_RangeProfiler_Start_Params>(
        CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    start.pRangeProfilerObject = profiler.get();
    check_cupti(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart");
    auto stop = detail::cupti_params<CUpti_RangeProfiler_Stop_Params>(
        CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = profiler.get();
    try {
      run_swept(run, stream);
    } catch (...) {
      cuptiRangeProfilerStop(&stop);
      throw;
    }
    check_cupti(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
    if (!stop.isAllPassSubmitted) {
      throw Error(ErrorKind::Profiler,
                  "cuptiRangeProfilerStop: kernel replay left passes unsubmitted; fusekit's "
                  "configuration is expected to need one pass");
    }

    auto decode = detail::cupti_params<CUpti_RangeProfiler_DecodeData_Params>(
        CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    decode.pRangeProfilerObject = profiler.get();
    check_cupti(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");
    if (decode.numOfRangeDropped != 0) {
      throw Error(ErrorKind::Profiler,
                  fmt::format("cuptiRangeProfilerDecodeData: {} ranges dropped (room for {})",
                              decode.numOfRangeDropped, capacity));
    }

    auto info = detail::cupti_params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = counter_data.data();
    info.counterDataImageSize = counter_data.size();
    check_cupti(cuptiRangeProfilerGetCounterDataInfo(&info),
                "cuptiRangeProfilerGetCounterDataInfo");
    if (info.numTotalRanges != ranges) {
      throw Error(ErrorKind::Profiler,
                  fmt::format("the range profiler saw {} kernels where the trace of the same work "
                              "saw {}: the work must launch the same kernels every run",
                              info.numTotalRanges, ranges));
    }
    std::vector<std::vector<double>> values;
    for (std::size_t r = 0; r < ranges; ++r) {
      values.push_back(detail::evaluate(*host, counter_data, r, names));
    }
    return values;
  }
};

Profiler::Profiler(Flush flush) : impl_(std::make_unique<Impl>()) {
  impl_->flush = flush;
  impl_->device = current_device_info();
  if (g_profiler_alive.exchange(true)) {
    throw Error(ErrorKind::Profiler,
                "a fusekit::verify::Profiler already exists in this process; "
                "CUPTI's hooks are process-wide, so one at a time");
  }
  try {
    impl_->context = current_context();
    auto init = detail::cupti_params<CUpti_Profiler_Initialize_Params>(
        CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    check_cupti(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    impl_->initialized = true;

    auto chip = detail::cupti_params<CUpti_Device_GetChipName_Params>(
        CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    chip.deviceIndex = static_cast<std::size_t>(impl_->device.index);
    check_cupti(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
    impl_->chip = chip.pChipName;

    const std::vector<std::uint8_t> availability = counter_availability(impl_->context);
    impl_->config = counter_config(impl_->chip, availability);
    if (impl_->config.passes != 1) {
      throw Error(ErrorKind::Profiler,
                  fmt::format("the counter configuration for {} needs {} passes; fusekit measures "
                              "each kernel once, in one pass",
                              impl_->chip, impl_->config.passes));
    }
    impl_->host = std::make_unique<detail::HostObject>(impl_->chip, availability);
    // Asks for the counters once now, so that a machine that forbids them says so before any
    // work is run.
    { const RangeProfiler probe(impl_->context); }

    impl_->sweep_buffer = DeviceBuffer(impl_->device.l2_bytes * kSweepL2Multiple);
    impl_->sink = DeviceBuffer(sizeof(unsigned int));
    check_cuda(cudaMemset(impl_->sweep_buffer.data(), 0, impl_->sweep_buffer.bytes()),
               "cudaMemset of the L2 sweep buffer");
    impl_->sweeps.buffer = impl_->sweep_buffer.data();
    impl_->sweeps.bytes = impl_->sweep_buffer.bytes();
    impl_->sweeps.sink = static_cast<unsigned int*>(impl_->sink.data());
    impl_->sweeps.blocks = impl_->device.device_sm_count * kL2SweepBlocksPerSm;
    // NOTE: the first launch loads the sweep's module (lazy loading); do it here, not inside a
    // launch callback.
    impl_->sweep_now(nullptr);
    check_cuda(cudaDeviceSynchronize(), "first L2 sweep");

    if (flush == Flush::EachKernel) {
      check_cupti(cuptiSubscribe(&impl_->subscriber, on_launch, &impl_->sweeps), "cuptiSubscribe");
      for (CUpti_CallbackId cbid : kRuntimeLaunches) {
        check_cupti(cuptiEnableCallback(1, impl_->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid),
                    "cuptiEnableCallback(runtime launch)");
      }
      for (CUpti_CallbackId cbid : kDriverLaunches) {
        check_cupti(cuptiEnableCallback(1, impl_->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid),
                    "cuptiEnableCallback(driver launch)");
      }
    }
  } catch (...) {
    impl_->release();
    throw;
  }
}

Profiler::~Profiler() { impl_->release(); }

const std::string& Profiler::chip() const { return impl_->chip; }
Flush Profiler::flush() const { return impl_->flush; }

std::vector<KernelCounters> Profiler::profile(const std::function<void(cudaStream_t)>& run,
                                              cudaStream_t stream) {
  const std::vector<KernelRecord> records = impl_->trace(run, stream);
  const std::vector<std::vector<double>> values = impl_->count(run, stream, records.size());

  const std::vector<std::string>& metrics = impl_->config.metrics;
  auto index_of = [&](std::string_view name) -> std::optional<std::size_t> {
    const auto it = std::find(metrics.begin(), metrics.end(), name);
    if (it == metrics.end()) return std::nullopt;
    return static_cast<std::size_t>(it - metrics.begin());
  };
  auto value = [&](std::size_t range, std::string_view name) -> std::optional<double> {
    const auto i = index_of(name);
    if (!i) return std::nullopt;
    return values[range][*i];
  };
  auto is_sweep = [&](std::size_t i) { return records[i].name == kL2SweepKernel; };

  std::vector<KernelCounters> kernels;
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (is_sweep(i)) continue;
    KernelCounters k;
    k.name = records[i].name;
    k.registers_per_thread = records[i].registers;
    k.local_bytes_per_thread = records[i].local_bytes;
    k.dram_read_bytes = value(i, "dram__bytes_read.sum").value_or(0);
    k.dram_write_bytes = value(i, "dram__bytes_write.sum").value_or(0);
    if (i + 1 < records.size() && is_sweep(i + 1)) {
      k.dram_writeback_bytes = value(i + 1, "dram__bytes_write.sum").value_or(0);
    }
    k.hmma_instructions = value(i, "sm__inst_executed_pipe_tensor_op_hmma.sum");
    k.gmma_instructions = value(i, "sm__inst_executed_pipe_tensor_op_gmma.sum");
    k.local_load_bytes = value(i, "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum").value_or(0);
    k.local_store_bytes = value(i, "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum").value_or(0);
    k.duration_s = value(i, "gpu__time_duration.sum").value_or(0) * kSecondsPerNanosecond;
    k.cold_l2 = i > 0 && is_sweep(i - 1);
    kernels.push_back(std::move(k));
  }
  return kernels;
}

}  // namespace fusekit::verify
