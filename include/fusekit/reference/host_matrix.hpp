#pragma once
// Dense row-major host arrays of doubles: the currency of the CPU references.
#include <cstdint>
#include <vector>

namespace fusekit::reference {

struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> data;  // rows * cols, row-major

  Matrix() = default;
  Matrix(std::int64_t r, std::int64_t c, double fill = 0.0)
      : rows(r), cols(c), data(static_cast<std::size_t>(r * c), fill) {}
  double& operator()(std::int64_t r, std::int64_t c) { return data[static_cast<std::size_t>(r * cols + c)]; }
  double operator()(std::int64_t r, std::int64_t c) const { return data[static_cast<std::size_t>(r * cols + c)]; }
  bool empty() const { return data.empty(); }
};

}  // namespace fusekit::reference
