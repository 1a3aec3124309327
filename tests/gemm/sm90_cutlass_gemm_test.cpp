// Which Hopper kernel runs which epilogue chain (no device): the five chains compiled for
// themselves, the scale-bias-activation kernels for every chain of their form with the run-time
// parameters the chain names, nothing for chains outside it, and the schedule Auto picks.
#include <gtest/gtest.h>

#include <cmath>

#include "../../src/gemm/sm90_cutlass_gemm.hpp"

namespace fusekit::sm90 {
namespace {

using device::sm90::Activation;

TEST(Sm90Chains, TheLadderChainsKeepTheirOwnKernels) {
  EXPECT_EQ(match_chain(EpilogueSpec{}), Chain::Identity);
  EXPECT_EQ(match_chain(EpilogueSpec{}.bias().gelu_tanh()), Chain::BiasGelu);
  EXPECT_EQ(match_chain(EpilogueSpec{}.bias().gelu_tanh().residual()), Chain::BiasGeluResidual);
  EXPECT_EQ(match_chain(EpilogueSpec{}.swiglu(kSm90GateBlock)), Chain::SwiGlu);
  EXPECT_EQ(match_chain(EpilogueSpec{}.geglu(kSm90GateBlock)), Chain::GeGlu);
  EXPECT_EQ(schedule_blocker(Chain::GeGlu, Sm90Schedule::Pingpong), kGatedScheduleOnly);
}

// Each step of the form at most once, in order; the scales in any order among themselves.
TEST(Sm90Chains, ScaleBiasActTakesEveryChainOfItsFormWithItsParameters) {
  EXPECT_EQ(match_chain(EpilogueSpec{}.bias().silu()), Chain::ScaleBiasAct);
  EXPECT_EQ(match_chain(EpilogueSpec{}.residual()), Chain::ScaleBiasActResidual);
  EXPECT_EQ(match_chain(EpilogueSpec{}.bias().residual()), Chain::ScaleBiasActResidual);
  EXPECT_EQ(match_chain(EpilogueSpec{}.relu()), Chain::ScaleBiasAct);

  const auto silu = scale_bias_act_params(EpilogueSpec{}.bias().silu());
  ASSERT_TRUE(silu);
  EXPECT_EQ(silu->activation, Activation::Silu);
  EXPECT_EQ(silu->alpha, 1.0f);
  EXPECT_FALSE(silu->scaled);
  EXPECT_TRUE(std::isinf(silu->lo) && silu->lo < 0 && std::isinf(silu->hi) && silu->hi > 0) << "no clamp";

  const auto every = EpilogueSpec{}.column_scale().scale(0.5f).row_scale().bias().gelu_erf().clamp(-1.0f, 2.0f).residual();
  EXPECT_EQ(match_chain(every), Chain::ScaleBiasActResidual);
  const auto p = scale_bias_act_params(every);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->alpha, 0.5f);
  EXPECT_TRUE(p->scaled);
  EXPECT_EQ(p->activation, Activation::GeluErf);
  EXPECT_EQ(p->lo, -1.0f);
  EXPECT_EQ(p->hi, 2.0f);

  for (const auto& [spec, activation] :
       {std::pair{EpilogueSpec{}.row_scale().relu(), Activation::Relu},
        std::pair{EpilogueSpec{}.column_scale().gelu_tanh().clamp(0.0f, 1.0f), Activation::GeluTanh},
        std::pair{EpilogueSpec{}.scale(2.0f).clamp(-3.0f, 3.0f).residual(), Activation::Identity}}) {
    const auto q = scale_bias_act_params(spec);
    ASSERT_TRUE(q) << spec.to_string();
    EXPECT_EQ(q->activation, activation) << spec.to_string();
    EXPECT_TRUE(q->scaled) << spec.to_string();
  }
  const auto one = scale_bias_act_params(EpilogueSpec{}.scale(1.0f).bias().gelu_tanh());
  ASSERT_TRUE(one);
  EXPECT_FALSE(one->scaled) << "α = 1 alone multiplies by nothing";
}

TEST(Sm90Chains, ChainsOutsideTheFormHaveNoHopperKernel) {
  const EpilogueSpec outside[] = {
      EpilogueSpec{}.silu().bias(),                   // the bias after the activation
      EpilogueSpec{}.bias().scale(2.0f),              // a scale after the bias
      EpilogueSpec{}.relu().gelu_tanh(),              // two activations
      EpilogueSpec{}.clamp(0.0f, 1.0f).relu(),        // the clamp before the activation
      EpilogueSpec{}.residual().bias(),               // the residual before the bias
      EpilogueSpec{}.bias().residual().relu(),        // an activation after the residual
      EpilogueSpec{}.row_scale().row_scale(),         // r² is not one row scale
      EpilogueSpec{}.bias().bias(),                   // two biases
      EpilogueSpec{}.scale(0.5f).scale(0.5f),         // two alphas
      EpilogueSpec{}.add_source(1.0f),                // β·C
      EpilogueSpec{}.bias().store_aux().gelu_tanh(),  // an aux store
      EpilogueSpec{}.bias().cast(DType::F16),         // a mid-chain rounding
      EpilogueSpec{}.bias().quantize_e4m3().relu(),   // the quantize before the activation
      EpilogueSpec{}.swiglu(64),                      // a gate block other than the kernel's
      EpilogueSpec{}.geglu(256),
      EpilogueSpec{}.bias().swiglu(kSm90GateBlock),
  };
  for (const auto& spec : outside) {
    EXPECT_FALSE(scale_bias_act_params(spec)) << spec.to_string();
    EXPECT_FALSE(match_chain(spec)) << spec.to_string();
  }
}

// A final quantize_e4m3 takes the e4m3 kernels of the form, with and without R.
TEST(Sm90Chains, AFinalQuantizeTakesTheE4m3Kernels) {
  EXPECT_EQ(match_chain(EpilogueSpec{}.quantize_e4m3()), Chain::ScaleBiasActE4m3);
  EXPECT_EQ(match_chain(EpilogueSpec{}.bias().gelu_tanh().quantize_e4m3()), Chain::ScaleBiasActE4m3);
  EXPECT_EQ(match_chain(EpilogueSpec{}.row_scale().residual().quantize_e4m3()), Chain::ScaleBiasActResidualE4m3);
  const auto p = scale_bias_act_params(EpilogueSpec{}.bias().silu().clamp(-1.0f, 1.0f).quantize_e4m3());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->activation, Activation::Silu);
  EXPECT_EQ(p->hi, 1.0f);
  for (const Chain chain : {Chain::ScaleBiasActE4m3, Chain::ScaleBiasActResidualE4m3}) {
    EXPECT_TRUE(is_scale_bias_act(chain));
    EXPECT_EQ(schedule_blocker(chain, Sm90Schedule::Pingpong), kScaleBiasActScheduleOnly);
  }
}

// The scale-bias-activation kernels are compiled for the Cooperative schedule only, as the gated one.
TEST(Sm90Chains, ScaleBiasActRunsOnTheCooperativeScheduleOnly) {
  for (const Chain chain : {Chain::ScaleBiasAct, Chain::ScaleBiasActResidual}) {
    EXPECT_TRUE(schedule_blocker(chain, Sm90Schedule::Cooperative).empty());
    EXPECT_EQ(schedule_blocker(chain, Sm90Schedule::Pingpong), kScaleBiasActScheduleOnly);
  }
  EXPECT_TRUE(schedule_blocker(Chain::BiasGeluResidual, Sm90Schedule::Pingpong).empty());
}

// The deferred-epilogue kernel is compiled for the bias → GELU chains only.
TEST(Sm90Chains, DeferredRunsTheBiasGeluChainsOnly) {
  EXPECT_TRUE(schedule_blocker(Chain::BiasGelu, Sm90Schedule::Deferred).empty());
  EXPECT_TRUE(schedule_blocker(Chain::BiasGeluResidual, Sm90Schedule::Deferred).empty());
  for (const Chain chain : {Chain::Identity, Chain::SwiGlu, Chain::GeGlu, Chain::ScaleBiasAct,
                            Chain::ScaleBiasActResidual, Chain::ScaleBiasActE4m3, Chain::ScaleBiasActResidualE4m3})
    EXPECT_EQ(schedule_blocker(chain, Sm90Schedule::Deferred), kDeferredChainsOnly) << static_cast<int>(chain);
}

// Auto defers the residual chain's epilogue only where the H200 measured it faster: K of at least
// kDeferredMinK and at least kDeferredMinTilesPerSm tiles of 128×256 an SM.
TEST(Sm90Chains, AutoDefersOnlyLongResidualGemmsOfManyTiles) {
  constexpr int kSms = 132;
  const auto schedule = [&](Chain chain, std::int64_t m, std::int64_t n, std::int64_t k) {
    return auto_schedule(chain, m, n, k, kSms).schedule;
  };
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 8192, 8192, 8192), Sm90Schedule::Deferred);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 16384, 4096, 4096), Sm90Schedule::Deferred);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 8192, 8192, 2048), Sm90Schedule::Deferred);
  // K: one under the bound, and 1024, where the deferred kernel lost 17 %.
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 8192, 8192, kDeferredMinK - 1), Sm90Schedule::Cooperative);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 8192, 8192, 1024), Sm90Schedule::Cooperative);
  // Tiles: 25 × 16 = 400 >= 3 · 132 takes it, 24 × 16 = 384 does not; M and N round up to tiles.
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 3200, 4096, 4096), Sm90Schedule::Deferred);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 3073, 3841, 4096), Sm90Schedule::Deferred);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 3072, 4096, 4096), Sm90Schedule::Cooperative);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 4096, 4096, 4096), Sm90Schedule::Deferred);
  EXPECT_EQ(schedule(Chain::BiasGeluResidual, 2048, 4096, 4096), Sm90Schedule::Cooperative);
  // Fewer SMs, fewer tiles needed.
  EXPECT_EQ(auto_schedule(Chain::BiasGeluResidual, 3072, 4096, 4096, 128).schedule, Sm90Schedule::Deferred);
  // Every other chain stays on the Cooperative kernel, the bias → GELU chain without R included
  // (not measured on the H200 with the deferred kernel).
  for (const Chain chain : {Chain::Identity, Chain::BiasGelu, Chain::SwiGlu, Chain::GeGlu, Chain::ScaleBiasAct,
                            Chain::ScaleBiasActResidual, Chain::ScaleBiasActE4m3, Chain::ScaleBiasActResidualE4m3})
    EXPECT_EQ(schedule(chain, 8192, 8192, 8192), Sm90Schedule::Cooperative) << static_cast<int>(chain);
  // The reasons name the numbers that decided.
  EXPECT_NE(auto_schedule(Chain::BiasGeluResidual, 8192, 8192, 1024, kSms).why.find("K = 1024 < 2048"), std::string::npos);
  EXPECT_NE(auto_schedule(Chain::BiasGeluResidual, 2048, 4096, 4096, kSms).why.find("256 tiles on 132 SMs"),
            std::string::npos);
  EXPECT_NE(auto_schedule(Chain::BiasGeluResidual, 8192, 8192, 8192, kSms).why.find("deferred"), std::string::npos);
}

}  // namespace
}  // namespace fusekit::sm90
