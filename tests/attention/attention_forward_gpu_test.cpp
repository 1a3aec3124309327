// The portable attention forward kernel against the double CPU reference, for bf16 and f16 at
// every head dim, on every case of attention_forward_check.hpp.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "attention/attention_forward_check.hpp"
#include "fusekit/attention.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

class AttentionForwardGpu : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(AttentionForwardGpu, MatchesReference) {
  FUSEKIT_REQUIRE_GPU();
  const auto [dt, head_dim] = GetParam();
  attention_check::check_backend(dt, head_dim, AttentionBackend::Portable, attention_check::Coverage::Every);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndHeadDims, AttentionForwardGpu,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::Values(64, 128, 256)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Without an LSE tensor, and with a zero-length key sequence: O = 0, nothing else written.
TEST(AttentionForwardGpuEdges, NoKeysGivesZeros) {
  FUSEKIT_REQUIRE_GPU();
  DeviceTensor q(DType::BF16, {1, 70, 2, 64}), o(DType::BF16, {1, 70, 2, 64});
  DeviceTensor k(DType::BF16, {1, 0, 2, 64}), v(DType::BF16, {1, 0, 2, 64});
  fill_uniform(q, testing::fresh_seed(), -1.0f, 1.0f);
  poison(o);
  AttentionForwardArgs args;
  args.q = q;
  args.o = o;
  // NOTE: a zero-length tensor still needs a non-null, aligned base: reuse q's.
  args.k = k;
  args.v = v;
  args.k.data = args.v.data = q.data();
  attention_forward(args);
  for (const double x : download(o)) ASSERT_EQ(x, 0.0);
}

}  // namespace
}  // namespace fusekit
