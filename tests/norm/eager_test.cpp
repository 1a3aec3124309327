// Argument validation of the eager row ops (fusekit/eager_rows.hpp), which runs before any
// device access: a statistic an op reads or writes must be given, and each bad argument is named.
// No GPU needed (the pointers are never dereferenced).
#include <gtest/gtest.h>

#include <cmath>

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
  expect_error([] { eager::row_moments(NormKind::RmsNorm, matrix(0), {}, stats(1), NAN); }, "eps: expected finite");
}

// A map's output may be its input's exact view (in place), nothing else: a shifted view would
// overwrite elements other threads have not read; a reduction's output shares no byte with its input.
TEST(EagerArgs, RejectsOutputsOverlappingTheirInputs) {
  const auto shifted = TensorView::contiguous(fake_address(0, 128), DType::BF16, {8, 64});  // x's second row on
  expect_error([&] { eager::add(matrix(0), matrix(1), shifted); },
               "y: expected memory disjoint from x, or x's exact view");
  expect_error([&] { eager::scale_mask(matrix(0), 1.0f, Causal::No, shifted); }, "s: expected memory disjoint from x");
  const auto inside_x = TensorView::contiguous(fake_address(0), DType::F32, {8});
  expect_error([] { eager::affine(matrix(0), TensorView::contiguous(fake_address(2), DType::BF16, {64}), {},
                                  TensorView::contiguous(fake_address(2), DType::BF16, {8, 64})); },
               "y: expected memory disjoint from weight");
  expect_error([&] { eager::row_max(matrix(0), inside_x); }, "max: expected memory disjoint from s");
  expect_error([&] { eager::row_moments(NormKind::LayerNorm, matrix(0), stats(1), stats(1), 1e-5f); },
               "mean: expected memory disjoint from rstd");
  expect_error([&] { eager::row_exp_sum(matrix(0), stats(1), stats(1)); }, "sum: expected memory disjoint from max");
  expect_error([&] { eager::exp_normalize(matrix(0), stats(1), stats(2), matrix(1)); },
               "y: expected memory disjoint from max");
  // In place: every check without a device passes.
  testing::expect_device_check([] { eager::add(matrix(0), matrix(1), matrix(0)); }, "x");
}

}  // namespace
}  // namespace fusekit
