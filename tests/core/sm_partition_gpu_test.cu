// fusekit::SmPartitionStream on a GPU: every CTA of a grid of many more CTAs than the partition
// has SMs runs on at most that many distinct SMs (read from %smid), a full-device stream takes
// more, and sizes the device does not offer are refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
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
  const SmPartitionStream::Sizes sizes = SmPartitionStream::sizes();
  ASSERT_GT(sizes.alignment, 0);
  ASSERT_GE(sizes.device_sms, sizes.min_sms);
  const int device_sms = current_device_info().device_sm_count;
  const int ctas = kCtasPerSm * device_sms;
  // The smallest partition the device offers, and one that leaves a quarter of the SMs out.
  const int smallest = (sizes.min_sms + sizes.alignment - 1) / sizes.alignment * sizes.alignment;
  const int most = device_sms * 3 / 4 / sizes.alignment * sizes.alignment;
  for (const int sms : {smallest, most}) {
    if (sms < smallest) continue;
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

TEST(SmPartitionGpu, SizesTheDeviceDoesNotOfferAreRefusedByName) {
  FUSEKIT_REQUIRE_GPU();
  const SmPartitionStream::Sizes sizes = SmPartitionStream::sizes();
  if (sizes.alignment > 1)
    testing::expect_error([&] { SmPartitionStream partition(sizes.min_sms + 1); }, "sms: expected a multiple of");
  testing::expect_error([&] { SmPartitionStream partition(sizes.device_sms + sizes.alignment); }, "sms");
}

}  // namespace
}  // namespace fusekit
