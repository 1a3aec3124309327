#pragma once
// What this build of fusekit is: its version, the commit it was built from, the CUDA runtime it
// was built against and the machine code it carries, so that a printed or recorded result (the
// bench's JSON lines, `fusekit version`, scripts/gpu-check's summary) names the code that made it.
#include <string_view>

namespace fusekit {

struct BuildInfo {
  std::string_view version;  // the project's, "MAJOR.MINOR.PATCH"
  // 12 hex digits, with "-dirty" where a tracked file differed from the commit at build time;
  // "unknown" where the sources were not a git checkout (cmake/build_commit.cmake).
  std::string_view commit;
  int cuda_runtime_version;  // CUDART_VERSION built against: 1000·major + 10·minor
  std::string_view archs;    // the machine code built, e.g. "sm_80, sm_90a" (FUSEKIT_CUDA_GENCODE)
};

const BuildInfo& build_info();

}  // namespace fusekit
