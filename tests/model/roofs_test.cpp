#include "fusekit/model/roofs.hpp"

#include <stdexcept>

#include <gtest/gtest.h>

namespace fusekit::model {
namespace {

TEST(DatasheetRoofs, Gh100IsTheH200) {
  const Roofs roofs = datasheet_roofs("GH100");
  EXPECT_DOUBLE_EQ(roofs.dram_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::BF16), 989e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::F16), 989e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::E4M3), 1979e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::E5M2), 1979e12);
  EXPECT_DOUBLE_EQ(roofs.fp32_flops_per_s, 67e12);
  EXPECT_EQ(roofs.source, "datasheet GH100");
}

TEST(DatasheetRoofs, Ga100HasNoFp8TensorCores) {
  const Roofs roofs = datasheet_roofs("GA100");
  EXPECT_DOUBLE_EQ(roofs.dram_bytes_per_s, 2.039e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::BF16), 312e12);
  EXPECT_DOUBLE_EQ(roofs.fp32_flops_per_s, 19.5e12);
  EXPECT_FALSE(roofs.matrix_fp8_flops_per_s.has_value());
  EXPECT_THROW(roofs.matrix_flops_per_s(DType::E4M3), std::invalid_argument);
}

TEST(DatasheetRoofs, F32MatmulRunsAtTheFp32RateAndU8HasNone) {
  const Roofs roofs = datasheet_roofs("GH100");
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::F32), roofs.fp32_flops_per_s);
  EXPECT_THROW(roofs.matrix_flops_per_s(DType::U8), std::invalid_argument);
}

TEST(DatasheetRoofs, UnknownChipThrows) {
  EXPECT_THROW(datasheet_roofs("GB200"), std::invalid_argument);
}

TEST(MeasuredRoofs, TakeMeasuredRatesAndBorrowTheRest) {
  const Roofs datasheet = datasheet_roofs("GH100");
  const Roofs roofs = measured_roofs("NVIDIA H200", {4.1e12, 720e12, std::nullopt}, datasheet);
  EXPECT_DOUBLE_EQ(roofs.dram_bytes_per_s, 4.1e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::BF16), 720e12);
  EXPECT_DOUBLE_EQ(roofs.matrix_flops_per_s(DType::E4M3), 1979e12);
  EXPECT_DOUBLE_EQ(roofs.fp32_flops_per_s, 67e12);
  EXPECT_EQ(roofs.source, "measured on NVIDIA H200 (fp8, fp32 from datasheet GH100)");

  const Roofs with_fp8 = measured_roofs("NVIDIA H200", {4.1e12, 720e12, 1300e12}, datasheet);
  EXPECT_DOUBLE_EQ(with_fp8.matrix_flops_per_s(DType::E4M3), 1300e12);
  EXPECT_EQ(with_fp8.source, "measured on NVIDIA H200 (fp32 from datasheet GH100)");
}

TEST(MeasuredRoofs, RejectNonPositiveRates) {
  const Roofs datasheet = datasheet_roofs("GH100");
  EXPECT_THROW(measured_roofs("gpu", {0, 720e12, std::nullopt}, datasheet), std::invalid_argument);
  EXPECT_THROW(measured_roofs("gpu", {4.1e12, -1, std::nullopt}, datasheet), std::invalid_argument);
  EXPECT_THROW(measured_roofs("gpu", {4.1e12, 720e12, 0.0}, datasheet), std::invalid_argument);
}

}  // namespace
}  // namespace fusekit::model
