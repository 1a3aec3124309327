#pragma once
// The fixture of the CPU reference tests: fresh random inputs on every run, replayable.
// NOTE: every run draws a fresh seed; FUSEKIT_TEST_SEED=<seed> replays a failing one (each
// failure's trace names the seed).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fusekit/reference/host_matrix.hpp"
#include "support/seed.hpp"

namespace fusekit::reference {

class RandomInputsTest : public ::testing::Test {
 protected:
  // Values uniform in [−spread, spread].
  std::vector<double> random_vector(std::int64_t n, double spread = 1.0) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) x = spread * uniform_(rng_);
    return v;
  }
  Matrix random_matrix(std::int64_t rows, std::int64_t cols, double spread = 1.0) {
    Matrix m(rows, cols);
    m.data = random_vector(rows * cols, spread);
    return m;
  }

  const std::uint64_t seed_ = testing::fresh_seed();
  ::testing::ScopedTrace trace_{__FILE__, __LINE__, "FUSEKIT_TEST_SEED=" + std::to_string(seed_)};
  std::mt19937_64 rng_{seed_};
  std::uniform_real_distribution<double> uniform_{-1.0, 1.0};
};

}  // namespace fusekit::reference
