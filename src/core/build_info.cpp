#include "fusekit/build_info.hpp"

#include <cuda_runtime_api.h>

#include "fusekit_build_commit.h"  // generated at every build: FUSEKIT_BUILD_COMMIT

namespace fusekit {

const BuildInfo& build_info() {
  static constexpr BuildInfo kInfo{FUSEKIT_VERSION, FUSEKIT_BUILD_COMMIT, CUDART_VERSION, FUSEKIT_BUILT_ARCHS};
  return kInfo;
}

}  // namespace fusekit
