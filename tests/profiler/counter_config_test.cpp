// The range profiler's counter configuration is built on the host from a chip name alone: these
// run on a machine without a GPU (CUPTI's host API loads libnvperf_host, never the driver).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "fusekit/error.hpp"
#include "fusekit/verify.hpp"

namespace fusekit::verify {
namespace {

bool has(const CounterConfig& config, std::string_view metric) {
  return std::find(config.metrics.begin(), config.metrics.end(), metric) != config.metrics.end();
}

TEST(CounterConfig, Gh100TakesEveryMetricInOnePass) {
  const CounterConfig config = counter_config("GH100");
  EXPECT_EQ(config.chip, "GH100");
  ASSERT_EQ(config.metrics.size(), std::size(kMetrics));
  for (std::size_t i = 0; i < std::size(kMetrics); ++i) {
    EXPECT_EQ(config.metrics[i], kMetrics[i].name);
  }
  EXPECT_FALSE(config.image.empty());
  EXPECT_EQ(config.passes, 1u);
}

TEST(CounterConfig, Ga100HasHmmaButNoGmma) {
  const CounterConfig config = counter_config("GA100");
  EXPECT_TRUE(has(config, "sm__inst_executed_pipe_tensor_op_hmma.sum"));
  EXPECT_FALSE(has(config, "sm__inst_executed_pipe_tensor_op_gmma.sum"));
  EXPECT_TRUE(has(config, "dram__bytes_read.sum"));
  EXPECT_TRUE(has(config, "gpu__time_duration.sum"));
  EXPECT_FALSE(config.image.empty());
  EXPECT_EQ(config.passes, 1u);
}

TEST(CounterConfig, EveryRequiredMetricIsKept) {
  const CounterConfig config = counter_config("GH100");
  for (const Metric& m : kMetrics) {
    if (!m.optional) {
      EXPECT_TRUE(has(config, m.name)) << m.name;
    }
  }
}

TEST(CounterConfig, UnknownChipIsAProfilerErrorNamingIt) {
  try {
    counter_config("GX999");
    FAIL() << "expected fusekit::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Profiler);
    EXPECT_NE(std::string(e.what()).find("GX999"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fusekit::verify
