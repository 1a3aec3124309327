// The error type's mapping of CUDA statuses: no device, a GPU the build has no machine code for
// (Unsupported, naming the build's architectures), any other CUDA error. No GPU needed.
#include "fusekit/error.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace fusekit {
namespace {

ErrorKind kind_of(cudaError_t status, std::string* message = nullptr) {
  try {
    check_cuda(status, "launch of k");
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "expected an error for status " << static_cast<int>(status);
  return ErrorKind::Cuda;
}

TEST(CheckCuda, AGpuWithoutMachineCodeIsUnsupportedNamingTheBuild) {
  for (const cudaError_t status : {cudaErrorNoKernelImageForDevice, cudaErrorInvalidDeviceFunction}) {
    std::string message;
    EXPECT_EQ(kind_of(status, &message), ErrorKind::Unsupported);
    EXPECT_NE(message.find("launch of k: no fusekit machine code for this GPU"), std::string::npos) << message;
    EXPECT_NE(message.find("this build has sm_"), std::string::npos) << message;
  }
}

TEST(CheckCuda, OtherStatusesKeepTheirKinds) {
  EXPECT_NO_THROW(check_cuda(cudaSuccess, "launch of k"));
  EXPECT_EQ(kind_of(cudaErrorNoDevice), ErrorKind::NoDevice);
  EXPECT_EQ(kind_of(cudaErrorInsufficientDriver), ErrorKind::NoDevice);
  EXPECT_EQ(kind_of(cudaErrorMemoryAllocation), ErrorKind::Cuda);
}

}  // namespace
}  // namespace fusekit
