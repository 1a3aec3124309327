// Argument validation of the eager row ops (fusekit/eager_rows.hpp), which runs before any
// device access: a statistic an op reads or writes must be given, and each bad argument is named.
// No GPU needed (the pointers are never dereferenced).
#include <gtest/gtest.h>

#include "fusekit/eager_rows.hpp"
#include "fusekit/error.hpp"
#include "support/expect_error.hpp"
#include "support/fake_pointer.hpp"

namespace fusekit {
namespace {

using testing::expect_error;
using testing::fake_address;

TensorView matrix(std::size_t slot) { return TensorView::contiguous(fake_address(slot), DType::BF16, {8, 64}); }
TensorView stats(std::size_t slot) { return TensorView::contiguous(fake_address(slot), DType::F32, {8}); }

TEST(EagerArgs, RequiresTheStatisticsEachOpUses) {
  expect_error([] { eager::row_moments(NormKind::LayerNorm, matrix(0), {}, stats(1), 1e-5f); },
               "mean: expected f32 [rows]");
  expect_error([] { eager::row_moments(NormKind::RmsNorm, matrix(0), {}, {}, 1e-5f); }, "rstd: expected f32 [rows]");
  expect_error([] { eager::row_moments(NormKind::RmsNorm, matrix(0), stats(1), stats(2), 1e-5f); },
               "mean: expected empty for RMSNorm");
  expect_error([] { eager::row_moments(static_cast<NormKind>(5), matrix(0), {}, stats(2), 1e-5f); },
               "kind: expected LayerNorm or RmsNorm");
  expect_error([] { eager::normalize(matrix(0), stats(1), {}, matrix(2)); }, "rstd: expected f32 [rows]");
  expect_error([] { eager::row_max(matrix(0), {}); }, "max: expected f32 [rows]");
  expect_error([] { eager::row_exp_sum(matrix(0), stats(1), {}); }, "sum: expected f32 [rows]");
  expect_error([] { eager::row_exp_sum(matrix(0), {}, stats(1)); }, "max: expected f32 [rows]");
  expect_error([] { eager::exp_normalize(matrix(0), stats(1), {}, matrix(2)); }, "sum: expected f32 [rows]");
}

TEST(EagerArgs, RejectsEachBadArgumentByName) {
  expect_error([] { eager::row_max(matrix(0), TensorView::contiguous(fake_address(1), DType::F32, {7})); },
               "max elements");
  expect_error([] { eager::add(matrix(0), TensorView::contiguous(fake_address(1), DType::F16, {8, 64}), matrix(2)); },
               "r dtype");
  expect_error([] { eager::affine(matrix(0), TensorView::contiguous(fake_address(1), DType::BF16, {63}), {}, matrix(2)); },
               "weight shape");
  auto misaligned = stats(1);
  misaligned.data = fake_address(1, 2);
  expect_error([&] { eager::normalize(matrix(0), {}, misaligned, matrix(2)); }, "rstd address");
}

}  // namespace
}  // namespace fusekit
