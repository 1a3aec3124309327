#pragma once
// Fresh seeds for every run, replayable: FUSEKIT_TEST_SEED=<seed> makes every draw that seed (a
// failure's trace names the seed it ran with; run the failing test alone to replay it).
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace fusekit::testing {

inline std::uint64_t fresh_seed() {
  if (const char* env = std::getenv("FUSEKIT_TEST_SEED")) return std::stoull(env);
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) | rd();
}

}  // namespace fusekit::testing
