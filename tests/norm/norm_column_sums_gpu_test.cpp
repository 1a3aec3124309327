// Step 2 of the norm backward (src/norm/norm_column_sums.hpp) on its own, against double sums
// on the CPU: each of its three kernels (by column, 128-column tiles, 32-column tiles of many
// groups) on the shapes column_sum_kernel gives it, tails of partial tiles, dw or db alone,
// misaligned partials (the tile kernel's float4 loads refused), f32/f16/bf16 outputs, and the
// same bits on a second run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "../../src/norm/norm_column_sums.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/transfer.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

using device::ColumnSumKernel;

enum class Sums { Both, DwOnly, DbOnly };
enum class Partials { Aligned, Misaligned };  // Misaligned: one float past a 16-byte boundary

struct Case {
  std::int64_t groups;
  int n;
  Sums sums;
  Partials partials;
  ColumnSumKernel expected;
};

constexpr Case kCases[] = {
    {7, 1003, Sums::Both, Partials::Aligned, ColumnSumKernel::ByColumn},
    {64, 4100, Sums::Both, Partials::Aligned, ColumnSumKernel::ByColumn},
    {66, 32768, Sums::Both, Partials::Aligned, ColumnSumKernel::Tile},
    {65, 132, Sums::Both, Partials::Aligned, ColumnSumKernel::Tile},  // a tile and one float4
    {128, 4100, Sums::DwOnly, Partials::Aligned, ColumnSumKernel::Tile},
    {100, 260, Sums::DbOnly, Partials::Aligned, ColumnSumKernel::Tile},
    {66, 1003, Sums::Both, Partials::Aligned, ColumnSumKernel::ManyGroups},  // rows of odd length
    {66, 4096, Sums::Both, Partials::Misaligned, ColumnSumKernel::ManyGroups},
    {129, 4096, Sums::Both, Partials::Aligned, ColumnSumKernel::ManyGroups},
    {1056, 1000, Sums::DwOnly, Partials::Aligned, ColumnSumKernel::ManyGroups},
};

// The largest unit roundoff of storing an f32 in `dt`.
double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::BF16: return std::ldexp(1.0, -8);
    case DType::F16: return std::ldexp(1.0, -11);
    default: return 0.0;
  }
}

TEST(NormColumnSumsGpu, MatchesDoubleSumsOnEveryKernel) {
  FUSEKIT_REQUIRE_GPU();
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (const DType dt : {DType::F32, DType::F16, DType::BF16}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " groups " << c.groups << " n " << c.n);
      const std::int64_t offset = c.partials == Partials::Misaligned ? 1 : 0;
      const std::int64_t count = c.groups * c.n;
      DeviceTensor partial_dw(DType::F32, {count + offset}), partial_db(DType::F32, {count + offset});
      fill_uniform(partial_dw, seed, -1.0f, 1.0f);
      fill_uniform(partial_db, seed + 1, -1.0f, 1.0f);
      const std::vector<double> in_dw = download(partial_dw), in_db = download(partial_db);
      DeviceTensor dw(dt, {c.n}), db(dt, {c.n});

      device::NormColumnSumParams p;
      if (c.sums != Sums::DbOnly) p.partial_dw = static_cast<const float*>(partial_dw.data()) + offset;
      if (c.sums != Sums::DwOnly) p.partial_db = static_cast<const float*>(partial_db.data()) + offset;
      p.dw = dw.data();
      p.db = db.data();
      p.groups = c.groups;
      p.n = c.n;
      std::vector<std::uint8_t> first[2];
      for (int run = 0; run < 2; ++run) {
        poison(dw);
        poison(db);
        ASSERT_EQ(launch_norm_column_sums(dt, p, nullptr), c.expected);
        check_cuda(cudaDeviceSynchronize(), "column sums");
        const std::vector<std::uint8_t> got[2] = {testing::bit_pattern(dw), testing::bit_pattern(db)};
        for (int t = 0; t < 2; ++t) {
          if (run == 0) first[t] = got[t];
          else EXPECT_TRUE(first[t] == got[t]) << (t == 0 ? "dw" : "db") << " differs between runs";
        }
      }

      const auto check = [&](const std::vector<double>& in, const DeviceTensor& out, const char* name) {
        const std::vector<double> got = download(out);
        int bad = 0;
        for (int col = 0; col < c.n && bad < 5; ++col) {
          double sum = 0.0, magnitude = 0.0;
          for (std::int64_t k = 0; k < c.groups; ++k) {
            const double v = in[offset + k * c.n + col];
            sum += v;
            magnitude += std::fabs(v);
          }
          // f32 additions in any order (groups · 2⁻²⁴ · Σ|v|), then the store's rounding.
          const double f32_error = static_cast<double>(c.groups) * std::ldexp(1.0, -24) * magnitude;
          const double bound = f32_error + unit_roundoff(dt) * (std::fabs(sum) + f32_error);
          if (!std::isfinite(got[col]) || std::fabs(got[col] - sum) > bound) {
            ++bad;
            ADD_FAILURE() << name << "[" << col << "] = " << got[col] << ", expected " << sum << " ± " << bound;
          }
        }
      };
      if (p.partial_dw) check(in_dw, dw, "dw");
      if (p.partial_db) check(in_db, db, "db");
    }
  }
}

}  // namespace
}  // namespace fusekit
