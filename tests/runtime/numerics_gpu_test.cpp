#include <gtest/gtest.h>

#include <cmath>

#include "fusekit/buffer.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/transfer.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

TEST(NumericsGpu, PoisonIsNanInEveryFloatDtypeAndComparisonsCatchIt) {
  FUSEKIT_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::E4M3, DType::E5M2}) {
    DeviceTensor t(dt, {5, 7});
    poison(t);
    for (double v : download(t)) EXPECT_TRUE(std::isnan(v)) << dtype_name(dt);
    EXPECT_EQ(count_nonfinite(t), 35) << dtype_name(dt);
  }
}

TEST(NumericsGpu, FillIsFreshPerSeedWithinRangeAndComparisonIsExact) {
  FUSEKIT_REQUIRE_GPU();
  const auto seed = testing::fresh_seed();
  DeviceTensor a(DType::F32, {64, 33}), b(DType::F32, {64, 33});
  fill_uniform(a, seed, -2.0f, 3.0f);
  fill_uniform(b, seed + 1, -2.0f, 3.0f);
  const auto ha = download(a), hb = download(b);
  int equal = 0;
  for (std::size_t i = 0; i < ha.size(); ++i) {
    EXPECT_GE(ha[i], -2.0);
    EXPECT_LT(ha[i], 3.0);
    equal += ha[i] == hb[i];
  }
  EXPECT_LT(equal, 4) << "two seeds gave the same data";
  double d = 0, r = 0;
  for (std::size_t i = 0; i < ha.size(); ++i) {
    d += (ha[i] - hb[i]) * (ha[i] - hb[i]);
    r += hb[i] * hb[i];
  }
  const auto c = compare(a, b);
  EXPECT_NEAR(c.rel_l2, std::sqrt(d / r), 1e-12);
  EXPECT_EQ(c.nonfinite, 0);
  EXPECT_EQ(compare(a, a).rel_l2, 0.0);
}

TEST(NumericsGpu, UploadDownloadRoundTripsStridedViews) {
  FUSEKIT_REQUIRE_GPU();
  DeviceBuffer storage(8 * 10 * sizeof(std::uint16_t));
  auto t = TensorView::matrix(storage.data(), DType::BF16, 8, 6, 10);
  std::vector<double> values(48);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = round_to(DType::BF16, 0.37 * double(i) - 5.0);
  upload(values, t);
  EXPECT_EQ(download(t), values);
}

TEST(NumericsGpu, DownloadOfAColumnViewReadsThatColumn) {
  FUSEKIT_REQUIRE_GPU();
  constexpr std::int64_t kRows = 9, kCols = 7, kColumn = 4;
  DeviceBuffer storage(kRows * kCols * sizeof(float));
  const auto whole = TensorView::matrix(storage.data(), DType::F32, kRows, kCols, kCols);
  std::vector<double> values(kRows * kCols);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * double(i) - 3.0;
  upload(values, whole);
  auto* column_base = static_cast<float*>(storage.data()) + kColumn;
  const auto column = TensorView::matrix(column_base, DType::F32, kRows, 1, kCols);
  std::vector<double> want(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) want[r] = values[r * kCols + kColumn];
  EXPECT_EQ(download(column), want);
}

}  // namespace
}  // namespace fusekit
