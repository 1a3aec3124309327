#pragma once
// The CUPTI profiler host object (cupti_profiler_host.h) as a RAII type: it needs only a chip
// name, so everything built from it (configuration images, metric evaluation) runs without a
// GPU. Private to src/profiler.
#include <cupti_profiler_host.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fusekit::verify::detail {

class HostObject {
 public:
  // `availability`: the device's counter availability image, or empty.
  HostObject(std::string_view chip, std::span<const std::uint8_t> availability);
  ~HostObject();
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;

  CUpti_Profiler_Host_Object* get() const { return object_; }
  // Whether the chip knows the metric (cuptiProfilerHostGetMetricProperties).
  bool has_metric(const std::string& name) const;

 private:
  std::string chip_;
  std::vector<std::uint8_t> availability_;  // CUPTI may keep the pointer: hold a copy
  CUpti_Profiler_Host_Object* object_ = nullptr;
};

// The values of `metrics` in range `range` of a decoded counter data image.
std::vector<double> evaluate(const HostObject& host, std::span<const std::uint8_t> counter_data,
                             std::size_t range, const std::vector<const char*>& metrics);

// Pointers to the metric names (they stay owned by `names`), for the CUPTI calls.
std::vector<const char*> c_names(const std::vector<std::string>& names);

}  // namespace fusekit::verify::detail
