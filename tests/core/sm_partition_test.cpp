// fusekit::SmPartitionStream before any device: a count of no SMs is refused by name, and without
// a device the stream is Error(NoDevice), never a crash (no GPU needed).
#include <gtest/gtest.h>

#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "support/expect_error.hpp"

namespace fusekit {
namespace {

TEST(SmPartition, NoSmsRefusedByName) {
  testing::expect_error([] { SmPartitionStream partition(0); }, "sms: expected > 0, got 0");
  testing::expect_error([] { SmPartitionStream partition(-8); }, "sms");
  testing::expect_error([] { (void)SmPartitionStream::granted_sms(0); }, "sms: expected > 0, got 0");
}

TEST(SmPartition, WithoutADeviceIsNoDevice) {
  if (device_count() > 0) GTEST_SKIP() << "a device is present: tests/core/sm_partition_gpu_test.cu covers it";
  testing::expect_error([] { SmPartitionStream partition(8); }, "", ErrorKind::NoDevice);
  testing::expect_error([] { (void)SmPartitionStream::granted_sms(8); }, "", ErrorKind::NoDevice);
}

}  // namespace
}  // namespace fusekit
