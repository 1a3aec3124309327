// The Hopper attention forward kernel (AttentionBackend::Sm90) against the double CPU reference,
// for bf16 and f16 at every head dim, on the fixed-length cases of attention_forward_check.hpp
// (variable lengths stay on the portable kernel for now). Skips without an sm_90 GPU. Also: what
// the plan reports on each machine, and the Unsupported errors raised before any launch.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "attention/attention_forward_check.hpp"
#include "fusekit/attention.hpp"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "support/expect_error.hpp"
#include "support/gpu.hpp"

namespace fusekit {
namespace {

constexpr int kHopperMajor = 9, kHopperMinor = 0;

bool on_hopper() {
  if (device_count() == 0) return false;
  const DeviceInfo& info = current_device_info();
  return info.cc_major == kHopperMajor && info.cc_minor == kHopperMinor;
}

#define FUSEKIT_REQUIRE_SM90()                                                        \
  do {                                                                                \
    FUSEKIT_REQUIRE_GPU();                                                            \
    if (!on_hopper()) GTEST_SKIP() << "needs an sm_90 GPU for the Hopper kernel";     \
  } while (0)

// One small fixed-length call (bf16, D = 128): o aliases q and v aliases k, for the plan and
// argument tests, which launch nothing or are refused before the launch.
struct SmallCall {
  DeviceTensor q{DType::BF16, {1, 256, 2, 128}}, k{DType::BF16, {1, 256, 2, 128}};
  AttentionForwardArgs args() const {
    AttentionForwardArgs a;
    a.q = a.o = q;
    a.k = a.v = k;
    return a;
  }
};

class Sm90AttentionForwardGpu : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(Sm90AttentionForwardGpu, MatchesReference) {
  FUSEKIT_REQUIRE_SM90();
  const auto [dt, head_dim] = GetParam();
  attention_check::check_backend(dt, head_dim, AttentionBackend::Sm90, attention_check::Coverage::FixedLengths);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndHeadDims, Sm90AttentionForwardGpu,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16), ::testing::Values(64, 128, 256)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Auto picks the Hopper kernel for fixed lengths and the portable one, saying why, for variable
// lengths; Sm90, requested, runs for fixed lengths and is Unsupported for variable lengths.
TEST(Sm90AttentionPlan, AutoPicksSm90ForFixedLengthsOnly) {
  FUSEKIT_REQUIRE_SM90();
  const SmallCall call;
  AttentionForwardArgs args = call.args();
  AttentionReport report = plan_attention_forward(args);
  EXPECT_EQ(report.backend, AttentionBackend::Sm90) << report.reason;
  args.backend = AttentionBackend::Sm90;
  report = plan_attention_forward(args);
  EXPECT_EQ(report.backend, AttentionBackend::Sm90) << report.reason;
  args.backend = AttentionBackend::Auto;

  DeviceTensor packed_q(DType::BF16, {256, 2, 128}), packed_k(DType::BF16, {256, 2, 128});
  args.q = args.o = packed_q;
  args.k = args.v = packed_k;
  // Two int32 offsets of their own (no output may lie over them); never read by the plan.
  DeviceTensor offsets_storage(DType::F32, {2});
  const auto* offsets = static_cast<const std::int32_t*>(offsets_storage.data());
  args.varlen = VarlenBatch{offsets, offsets, 1, 256};
  report = plan_attention_forward(args);
  EXPECT_EQ(report.backend, AttentionBackend::Portable);
  EXPECT_NE(report.reason.find("variable lengths"), std::string::npos) << report.reason;
  args.backend = AttentionBackend::Sm90;
  try {
    plan_attention_forward(args);
    ADD_FAILURE() << "Sm90 with variable lengths must be Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

// sm_margin must leave the kernel at least one SM: checked by the plan, before any launch.
TEST(Sm90AttentionPlan, RejectsAnSmMarginOfEverySm) {
  FUSEKIT_REQUIRE_SM90();
  const SmallCall call;
  AttentionForwardArgs args = call.args();
  args.sm_margin = current_device_info().sm_count;
  testing::expect_error([&] { plan_attention_forward(args); }, "sm_margin");
  testing::expect_error([&] { attention_forward(args); }, "sm_margin");
}

}  // namespace
}  // namespace fusekit
