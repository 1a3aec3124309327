#include <gtest/gtest.h>

#include <cmath>

#include "bench/harness.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/pointwise.hpp"
#include "fusekit/reference/activation.hpp"
#include "fusekit/transfer.hpp"
#include "support/gpu.hpp"
#include "support/compare.hpp"

namespace fusekit {
namespace {

using testing::rel_l2;

class UnfusedGpu : public ::testing::TestWithParam<DType> {};

// y = gelu(x + bias), as two kernels, on aligned and odd shapes and on a padded row stride
// (which takes the scalar path).
TEST_P(UnfusedGpu, BiasThenGeluMatchesReference) {
  FUSEKIT_REQUIRE_GPU();
  const DType dt = GetParam();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt));
  struct Size { std::int64_t rows, cols, ld; };
  for (const Size s : {Size{64, 256, 256}, Size{37, 129, 129}, Size{50, 64, 72}, Size{3, 8, 13}}) {
    DeviceBuffer xs(static_cast<std::size_t>(s.rows * s.ld) * dtype_size(dt));
    DeviceBuffer ys(static_cast<std::size_t>(s.rows * s.ld) * dtype_size(dt));
    DeviceBuffer zs(static_cast<std::size_t>(s.rows * s.ld) * dtype_size(dt));
    auto x = TensorView::matrix(xs.data(), dt, s.rows, s.cols, s.ld);
    auto y = TensorView::matrix(ys.data(), dt, s.rows, s.cols, s.ld);
    auto z = TensorView::matrix(zs.data(), dt, s.rows, s.cols, s.ld);
    DeviceTensor bias(dt, {s.cols});
    fill_uniform(x, seed, -4, 4);
    fill_uniform(bias, seed + 1, -1, 1);
    poison(y);
    poison(z);
    add_bias(x, bias, y);
    gelu(y, z);
    const auto hx = download(x), hb = download(bias), hy = download(y), hz = download(z);
    std::vector<double> want_y(hx.size()), want_z(hx.size());
    for (std::int64_t i = 0; i < s.rows; ++i)
      for (std::int64_t j = 0; j < s.cols; ++j) {
        const auto e = static_cast<std::size_t>(i * s.cols + j);
        want_y[e] = hx[e] + hb[static_cast<std::size_t>(j)];
        want_z[e] = reference::gelu_tanh(hy[e]);
      }
    EXPECT_LE(rel_l2(hy, want_y), bench::tolerance(dt)) << s.rows << "x" << s.cols << " ld " << s.ld;
    EXPECT_LE(rel_l2(hz, want_z), bench::tolerance(dt)) << s.rows << "x" << s.cols << " ld " << s.ld;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, UnfusedGpu, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(UnfusedGpu, RejectsMismatchedBias) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor x(DType::BF16, {4, 16}), bias(DType::BF16, {15}), y(DType::BF16, {4, 16});
  EXPECT_THROW(add_bias(x, bias, y), Error);
  DeviceTensor bias32(DType::F32, {16});
  EXPECT_THROW(add_bias(x, bias32, y), Error);
}

}  // namespace
}  // namespace fusekit
