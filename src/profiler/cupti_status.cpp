#include "cupti_status.hpp"

#include <cupti.h>
#include <fmt/format.h>

#include <string>

#include "fusekit/error.hpp"

namespace fusekit::verify::detail {

namespace {

// What to do about the refusals a user can fix, by CUPTI result.
std::string_view remedy(CUptiResult result) {
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return "GPU performance counters are restricted to administrators on this machine. Run as "
             "root, or allow every user: load the nvidia module with "
             "NVreg_RestrictProfilingToAdminUsers=0 (e.g. 'options nvidia "
             "NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/, then reload the driver "
             "or reboot); see https://developer.nvidia.com/ERR_NVGPUCTRPERM";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
      return "another CUPTI client is attached to this process (Nsight Compute, Nsight Systems, "
             "or a second fusekit::verify::Profiler); run fusekit verify outside other profilers";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return "this virtual GPU does not expose performance counters to the guest";
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED: return "this GPU model does not support profiling";
    default: return "";
  }
}

}  // namespace

void check_cupti(CUptiResult result, std::string_view what) {
  if (result == CUPTI_SUCCESS) return;
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) name = "unknown";
  std::string message = fmt::format("{}: {} ({})", what, name, static_cast<int>(result));
  if (const std::string_view fix = remedy(result); !fix.empty()) {
    message += fmt::format(": {}", fix);
  }
  throw Error(ErrorKind::Profiler, message);
}

}  // namespace fusekit::verify::detail
