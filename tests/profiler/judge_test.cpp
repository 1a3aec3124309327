// The seed checks on synthetic counters: each verdict passes on a plausible correct run and
// fails on the defect it exists to catch.
#include <gtest/gtest.h>

#include <algorithm>

#include "fusekit/error.hpp"
#include "fusekit/verify.hpp"
#include "profiler/synthetic_rungs.hpp"

namespace fusekit::verify {
namespace {

using namespace testing;

Verdict only(const std::vector<Verdict>& verdicts, Check check) {
  const auto n = std::count_if(verdicts.begin(), verdicts.end(),
                               [&](const Verdict& v) { return v.check == check; });
  EXPECT_EQ(n, 1) << check_name(check);
  return *std::find_if(verdicts.begin(), verdicts.end(),
                       [&](const Verdict& v) { return v.check == check; });
}

RungMeasurement& named(std::vector<RungMeasurement>& rungs, std::string_view name) {
  return *std::find_if(rungs.begin(), rungs.end(),
                       [&](const RungMeasurement& r) { return r.name == name; });
}

TEST(Judge, ACorrectLinearLadderPassesEveryCheck) {
  const std::vector<Verdict> verdicts = judge(linear_rungs());
  ASSERT_EQ(verdicts.size(), 4u);  // one DRAM verdict: cublaslt vs unfused; gemm is a kernel alone
  for (const Verdict& v : verdicts) {
    EXPECT_EQ(v.outcome, Outcome::Pass) << check_name(v.check) << ": " << v.detail;
  }
  const Verdict drop = only(verdicts, Check::DramDrop);
  EXPECT_EQ(drop.subject, "cublaslt vs unfused");
  EXPECT_NE(drop.detail.find("modelled 128.0 MiB"), std::string::npos) << drop.detail;
  EXPECT_NE(drop.detail.find("4 output crossing(s)"), std::string::npos) << drop.detail;
}

TEST(Judge, DramDropWithinTheToleranceOnly) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  // The fused rung moves 14% of the modelled drop more than it should: measured drop 86%.
  named(rungs, "cublaslt").kernels[0].dram_read_bytes += 0.14 * 4 * kOutputBytes;
  EXPECT_EQ(only(judge(rungs), Check::DramDrop).outcome, Outcome::Pass);
  named(rungs, "cublaslt").kernels[0].dram_read_bytes += 0.02 * 4 * kOutputBytes;
  EXPECT_EQ(only(judge(rungs), Check::DramDrop).outcome, Outcome::Fail);
  Thresholds loose;
  loose.dram_tolerance = 0.2;
  EXPECT_EQ(only(judge(rungs, loose), Check::DramDrop).outcome, Outcome::Pass);
}

TEST(Judge, NoFusionMeansNoDrop) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  // The "fused" rung moved as much as the unfused one: the fusion did not happen.
  named(rungs, "cublaslt").kernels[0].dram_read_bytes += 4 * kOutputBytes;
  const Verdict drop = only(judge(rungs), Check::DramDrop);
  EXPECT_EQ(drop.outcome, Outcome::Fail);
  EXPECT_NE(drop.detail.find("off by 100.0%"), std::string::npos) << drop.detail;
}

TEST(Judge, GemmWithoutTensorInstructionsFails) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  KernelCounters& gemm = named(rungs, "unfused").kernels[0];
  gemm.hmma_instructions = 0;
  gemm.gmma_instructions = 0;
  const Verdict v = only(judge(rungs), Check::TensorCores);
  EXPECT_EQ(v.outcome, Outcome::Fail);
  EXPECT_NE(v.detail.find("unfused/sm90_xmma"), std::string::npos) << v.detail;
}

TEST(Judge, HmmaAloneCountsAsTensorCores) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  for (RungMeasurement& r : rungs) {
    for (KernelCounters& k : r.kernels) k.gmma_instructions.reset();  // an A100: no GMMA counter
  }
  EXPECT_EQ(only(judge(rungs), Check::TensorCores).outcome, Outcome::Pass);
}

TEST(Judge, NoTensorCounterOnTheChipIsNotApplicable) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  for (RungMeasurement& r : rungs) {
    for (KernelCounters& k : r.kernels) {
      k.hmma_instructions.reset();
      k.gmma_instructions.reset();
    }
  }
  EXPECT_EQ(only(judge(rungs), Check::TensorCores).outcome, Outcome::NotApplicable);
}

TEST(Judge, UnmatchedKernelCountJudgesTheRungAsAWhole) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  // cuBLASLt split the K loop: a GEMM kernel and a reduction kernel where the model has one.
  RungMeasurement& fused = named(rungs, "cublaslt");
  fused.kernels.push_back(kernel("splitKreduce_kernel", kOutputBytes, kOutputBytes, 0, 10e-6));
  EXPECT_EQ(fused.modelled(0), nullptr);
  EXPECT_EQ(fused.kernel_flops(0), 0.0);
  EXPECT_EQ(only(judge(rungs), Check::TensorCores).outcome, Outcome::Pass);
  fused.kernels[0].hmma_instructions = 0;
  fused.kernels[0].gmma_instructions = 0;
  EXPECT_EQ(only(judge(rungs), Check::TensorCores).outcome, Outcome::Fail);
}

TEST(Judge, AnyLocalTrafficFails) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  named(rungs, "unfused").kernels[2].local_store_bytes = 4096;
  const Verdict v = only(judge(rungs), Check::NoLocalTraffic);
  EXPECT_EQ(v.outcome, Outcome::Fail);
  EXPECT_NE(v.detail.find("GeluOp"), std::string::npos) << v.detail;
}

TEST(Judge, RegistersMustStayBelowTheThreshold) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  named(rungs, "cublaslt").kernels[0].registers_per_thread = 239;
  EXPECT_EQ(only(judge(rungs), Check::Registers).outcome, Outcome::Pass);
  named(rungs, "cublaslt").kernels[0].registers_per_thread = 240;
  EXPECT_EQ(only(judge(rungs), Check::Registers).outcome, Outcome::Fail);
}

TEST(Judge, MissingBaselineOrModelLeavesTheDropUnjudged) {
  std::vector<RungMeasurement> rungs = linear_rungs();
  named(rungs, "unfused").kernels.clear();  // failed validation: not profiled
  const Verdict v = only(judge(rungs), Check::DramDrop);
  EXPECT_EQ(v.outcome, Outcome::NotApplicable);

  std::vector<RungMeasurement> unmodelled = linear_rungs();
  for (RungMeasurement& r : unmodelled) {
    r.match = ModelMatch::None;
    r.model.reset();
  }
  const std::vector<Verdict> verdicts = judge(unmodelled);
  EXPECT_EQ(only(verdicts, Check::DramDrop).outcome, Outcome::NotApplicable);
  EXPECT_EQ(only(verdicts, Check::TensorCores).outcome, Outcome::NotApplicable);
  EXPECT_EQ(only(verdicts, Check::NoLocalTraffic).outcome, Outcome::Pass);
}

TEST(RungMeasurement, KernelsMapOntoTheModelInOrder) {
  const std::vector<RungMeasurement> rungs = linear_rungs();
  const RungMeasurement& unfused = rungs[1];
  ASSERT_NE(unfused.modelled(1), nullptr);
  EXPECT_EQ(unfused.modelled(0)->name, "gemm");
  EXPECT_EQ(unfused.modelled(1)->name, "bias_add");
  EXPECT_EQ(unfused.modelled(2)->name, "gelu");
  EXPECT_DOUBLE_EQ(unfused.kernel_flops(0), 2.0 * kSide * kSide * kSide);
  EXPECT_DOUBLE_EQ(unfused.dram_bytes(), 7 * kOutputBytes + kBiasBytes);
  EXPECT_DOUBLE_EQ(unfused.duration_s(), 210e-6);
  // A rung the model lacks: its one kernel does the rung's flops.
  RungMeasurement bare;
  bare.kernels = {gemm_kernel()};
  bare.flops = 5;
  EXPECT_DOUBLE_EQ(bare.kernel_flops(0), 5);
}

TEST(Flush, NamesRoundTrip) {
  for (Flush f : {Flush::EachKernel, Flush::EachRun}) EXPECT_EQ(parse_flush(flush_name(f)), f);
  EXPECT_THROW(parse_flush("never"), Error);
}

}  // namespace
}  // namespace fusekit::verify
