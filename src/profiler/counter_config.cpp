// The range profiler's counter configuration image, built on the host from a chip name.
#include <fmt/format.h>

#include "cupti_status.hpp"
#include "fusekit/error.hpp"
#include "fusekit/verify.hpp"
#include "host_object.hpp"

namespace fusekit::verify {

namespace detail {

HostObject::HostObject(std::string_view chip, std::span<const std::uint8_t> availability)
    : chip_(chip), availability_(availability.begin(), availability.end()) {
  auto params = detail::cupti_params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  params.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  params.pChipName = chip_.c_str();
  params.pCounterAvailabilityImage = availability_.empty() ? nullptr : availability_.data();
  check_cupti(cuptiProfilerHostInitialize(&params),
              fmt::format("cuptiProfilerHostInitialize(chip {})", chip_));
  object_ = params.pHostObject;
}

HostObject::~HostObject() {
  auto params = detail::cupti_params<CUpti_Profiler_Host_Deinitialize_Params>(
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
  params.pHostObject = object_;
  cuptiProfilerHostDeinitialize(&params);
}

bool HostObject::has_metric(const std::string& name) const {
  auto params = detail::cupti_params<CUpti_Profiler_Host_GetMetricProperties_Params>(
      CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
  params.pHostObject = object_;
  params.pMetricName = name.c_str();
  return cuptiProfilerHostGetMetricProperties(&params) == CUPTI_SUCCESS;
}

std::vector<double> evaluate(const HostObject& host, std::span<const std::uint8_t> counter_data,
                             std::size_t range, const std::vector<const char*>& metrics) {
  std::vector<double> values(metrics.size());
  auto params = detail::cupti_params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  params.pHostObject = host.get();
  params.pCounterDataImage = counter_data.data();
  params.counterDataImageSize = counter_data.size();
  params.rangeIndex = range;
  // NOTE: CUPTI declares the names `const char**` but only reads them.
  params.ppMetricNames = const_cast<const char**>(metrics.data());
  params.numMetrics = metrics.size();
  params.pMetricValues = values.data();
  check_cupti(cuptiProfilerHostEvaluateToGpuValues(&params),
              fmt::format("cuptiProfilerHostEvaluateToGpuValues(range {})", range));
  return values;
}

std::vector<const char*> c_names(const std::vector<std::string>& names) {
  std::vector<const char*> pointers;
  for (const std::string& n : names) pointers.push_back(n.c_str());
  return pointers;
}

}  // namespace detail

CounterConfig counter_config(std::string_view chip,
                             std::span<const std::uint8_t> counter_availability) {
  const detail::HostObject host(chip, counter_availability);
  CounterConfig config;
  config.chip = std::string(chip);
  for (const Metric& metric : kMetrics) {
    std::string name(metric.name);
    if (host.has_metric(name)) {
      config.metrics.push_back(std::move(name));
    } else if (!metric.optional) {
      throw Error(ErrorKind::Profiler,
                  fmt::format("metric {}: expected on chip {}, but CUPTI does not know it",
                              metric.name, chip));
    }
  }

  std::vector<const char*> names = detail::c_names(config.metrics);
  auto add = detail::cupti_params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = host.get();
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  detail::check_cupti(cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics");

  auto size = detail::cupti_params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = host.get();
  detail::check_cupti(cuptiProfilerHostGetConfigImageSize(&size),
                      "cuptiProfilerHostGetConfigImageSize");
  config.image.resize(size.configImageSize);

  auto image = detail::cupti_params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = host.get();
  image.configImageSize = config.image.size();
  image.pConfigImage = config.image.data();
  detail::check_cupti(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");

  auto passes = detail::cupti_params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = config.image.size();
  passes.pConfigImage = config.image.data();
  detail::check_cupti(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses");
  config.passes = passes.numOfPasses;
  return config;
}

}  // namespace fusekit::verify
