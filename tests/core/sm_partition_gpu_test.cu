// fusekit::SmPartitionStream on a GPU: every CTA of a grid of many more CTAs than the partition
// has SMs runs on at most that many distinct SMs (read from %smid), a full-device stream takes
// more, and sizes the driver does not grant whole are refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "support/expect_error.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

constexpr int kCtasPerSm = 8;           // many CTAs per SM: every SM the stream may use gets some
constexpr long long kSpinCycles = 20000;  // long enough that the CTAs overlap across SMs

__global__ void record_sm_kernel(unsigned int* sm_of_cta) {
  const long long start = clock64();
  while (clock64() - start < kSpinCycles) {
  }
  if (threadIdx.x == 0) {
    unsigned int sm = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm_of_cta[blockIdx.x] = sm;
  }
}

// The distinct SMs the CTAs of one launch on `stream` ran on.
std::set<unsigned int> sms_used(cudaStream_t stream, int ctas) {
  DeviceBuffer sm_of_cta(sizeof(unsigned int) * static_cast<std::size_t>(ctas));
  record_sm_kernel<<<ctas, 32, 0, stream>>>(static_cast<unsigned int*>(sm_of_cta.data()));
  check_cuda(cudaGetLastError(), "record_sm_kernel");
  check_cuda(cudaStreamSynchronize(stream), "record_sm_kernel");
  std::vector<unsigned int> host(static_cast<std::size_t>(ctas));
  check_cuda(cudaMemcpy(host.data(), sm_of_cta.data(), sm_of_cta.bytes(), cudaMemcpyDeviceToHost), "copy");
  return {host.begin(), host.end()};
}

TEST(SmPartitionGpu, KernelsRunOnThePartitionsSmsOnly) {
  FUSEKIT_REQUIRE_GPU();
  const int device_sms = current_device_info().device_sm_count;
  const int ctas = kCtasPerSm * device_sms;
  // The smallest partition the driver grants, and the one it grants for three quarters of the SMs.
  const int smallest = SmPartitionStream::granted_sms(1);
  const int most = SmPartitionStream::granted_sms(device_sms * 3 / 4);
  ASSERT_GE(smallest, 1);
  ASSERT_GE(most, smallest);
  ASSERT_LT(most, device_sms);
  for (const int sms : {smallest, most}) {
    SCOPED_TRACE(sms);
    SmPartitionStream partition(sms);
    EXPECT_EQ(partition.sms(), sms);
    const auto used = sms_used(partition, ctas);
    EXPECT_LE(static_cast<int>(used.size()), sms);
    EXPECT_GE(static_cast<int>(used.size()), 1);
  }
  Stream whole;
  EXPECT_GT(static_cast<int>(sms_used(whole, ctas).size()), most) << "the whole device takes more SMs";
}

// A request the driver rounds up is refused, naming what it grants; more SMs than the GPU has too.
TEST(SmPartitionGpu, SizesTheDriverDoesNotGrantWholeAreRefusedByName) {
  FUSEKIT_REQUIRE_GPU();
  const int smallest = SmPartitionStream::granted_sms(1);
  if (smallest > 1)
    testing::expect_error([] { SmPartitionStream partition(1); },
                          "sms: expected a partition the driver grants whole (its green contexts' granularity), got 1 "
                          "(granted " + std::to_string(smallest));
  const int device_sms = current_device_info().device_sm_count;
  EXPECT_EQ(SmPartitionStream::granted_sms(device_sms + 1), 0);
  testing::expect_error([&] { SmPartitionStream partition(device_sms + 1); }, "sms: expected at most the GPU's");
}

}  // namespace
}  // namespace fusekit
