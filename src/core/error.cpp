#include <fmt/format.h>

#include "fusekit/error.hpp"

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "fusekit/build_info.hpp"

namespace fusekit {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidArgument: return "invalid argument";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::NoDevice: return "no CUDA device";
    case ErrorKind::Cuda: return "CUDA error";
    case ErrorKind::Cublas: return "cuBLAS error";
    case ErrorKind::Profiler: return "profiler error";
  }
  return "error";
}

void throw_invalid(std::string_view arg, std::string_view expected, std::string_view actual) {
  throw Error(ErrorKind::InvalidArgument,
              fmt::format("{}: expected {}, got {}", arg, expected, actual));
}

void check_cuda(int status, std::string_view what) {
  if (status == cudaSuccess) return;
  auto err = static_cast<cudaError_t>(status);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    throw Error(ErrorKind::NoDevice, fmt::format("{}: {}", what, cudaGetErrorString(err)));
  }
  // A GPU the build has no machine code for (no PTX is embedded): say which it has.
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    throw Error(ErrorKind::Unsupported,
                fmt::format("{}: no fusekit machine code for this GPU ({}); this build has {} "
                            "(FUSEKIT_CUDA_GENCODE)",
                            what, cudaGetErrorName(err), build_info().archs));
  }
  throw Error(ErrorKind::Cuda,
              fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

void check_cublas(int status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(ErrorKind::Cublas, fmt::format("{}: cublasStatus {}", what, status));
}

void check_launch(std::string_view kernel) {
  check_cuda(cudaGetLastError(), fmt::format("launch of {}", kernel));
}

}  // namespace fusekit
