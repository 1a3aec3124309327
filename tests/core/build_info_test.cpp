// fusekit::build_info: the version, commit, CUDA runtime and machine code a build names.
#include "fusekit/build_info.hpp"

#include <regex>
#include <string>

#include <gtest/gtest.h>

namespace fusekit {
namespace {

bool matches(std::string_view text, const char* pattern) {
  return std::regex_match(std::string(text), std::regex(pattern));
}

TEST(BuildInfo, CommitIsTwelveHexDigitsOrUnknown) {
  EXPECT_TRUE(matches(build_info().commit, "[0-9a-f]{12}(-dirty)?|unknown")) << build_info().commit;
}

TEST(BuildInfo, VersionIsMajorMinorPatch) {
  EXPECT_TRUE(matches(build_info().version, "[0-9]+\\.[0-9]+\\.[0-9]+")) << build_info().version;
}

TEST(BuildInfo, CudaRuntimeIsTheToolkitTheBuildRequires) {
  constexpr int kCuda13 = 13000;  // CMakeLists.txt: find_package(CUDAToolkit 13 REQUIRED)
  EXPECT_GE(build_info().cuda_runtime_version, kCuda13);
}

TEST(BuildInfo, ArchsListMachineCode) {
  EXPECT_TRUE(matches(build_info().archs, "sm_[0-9]+a?(, sm_[0-9]+a?)*")) << build_info().archs;
}

}  // namespace
}  // namespace fusekit
