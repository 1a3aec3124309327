#include "fusekit/model/traffic.hpp"

#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fusekit::model {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// "The arithmetic" of the first seed, number by number.
TEST(SeedNumbers, LinearF16At4096AndOneHeadAt8192) {
  const SeedNumbers seeds = seed_numbers();
  // bias_add reads T1 and b, writes T2; gelu reads T2, writes Y: four 4096×4096 f16 passes.
  constexpr std::int64_t kSide = 4096;
  constexpr std::int64_t kF16Bytes = 2;
  constexpr std::int64_t kPass = kSide * kSide * kF16Bytes;
  EXPECT_EQ(seeds.epilogue_bytes, 4 * kPass + kSide * kF16Bytes);
  EXPECT_EQ(seeds.epilogue_bytes, 134'225'920);  // "roughly 130 MB"
  // "34 million flops": one bias add and one GELU flop per element.
  EXPECT_DOUBLE_EQ(seeds.epilogue_flops, 2.0 * kSide * kSide);
  EXPECT_DOUBLE_EQ(seeds.epilogue_flops, 33'554'432);
  EXPECT_EQ(seeds.output_crossings_unfused, 5);  // "crosses HBM five times"
  EXPECT_EQ(seeds.output_crossings_fused, 1);    // "Fused, it crosses once"
  EXPECT_EQ(seeds.scores_per_head, 67'108'864);  // "64 million values"
  EXPECT_EQ(seeds.scores_per_head, 64 * kMiB);
}

// One kernel, numbers chosen by hand: 1 GB moved, 4 TFLOP on tensor cores, 0.1 TFLOP of fp32.
Ladder hand_ladder() {
  return Ladder{.name = "hand",
                .maths = "B = A·A",
                .dtype = DType::F16,
                .dims = {{"N", 250'000'000}},
                .tensors = {{"A", {"N"}, DType::F16}, {"B", {"N"}, DType::F16}},
                .output = "B",
                .rungs = {{"one", {{"square", 4e12, 1e11, {"A"}, {"B"}}}}}};
}

Roofs hand_roofs() {
  return Roofs{.dram_bytes_per_s = 1e12,
               .matrix_16bit_flops_per_s = 1e15,
               .matrix_fp8_flops_per_s = std::nullopt,
               .fp32_flops_per_s = 1e13,
               .source = "hand"};
}

TEST(Analyze, IntensityAndFloorOfAHandCase) {
  const Ladder ladder = hand_ladder();
  const RungReport rung = analyze(ladder, ladder.rung("one"), hand_roofs());
  ASSERT_EQ(rung.kernels.size(), 1u);
  const KernelReport& k = rung.kernels[0];
  EXPECT_EQ(k.traffic.bytes_read, 500'000'000);
  EXPECT_EQ(k.traffic.bytes_written, 500'000'000);
  EXPECT_DOUBLE_EQ(k.traffic.intensity(), 4.1e12 / 1e9);
  EXPECT_DOUBLE_EQ(k.floor.memory_s, 1e-3);
  EXPECT_DOUBLE_EQ(k.floor.matrix_s, 4e-3);
  EXPECT_DOUBLE_EQ(k.floor.fp32_s, 1e-2);
  EXPECT_DOUBLE_EQ(k.floor.seconds, 1e-2);
  EXPECT_EQ(k.floor.limiter, Limiter::Fp32);
  EXPECT_DOUBLE_EQ(rung.floor_s, 1e-2);
  EXPECT_EQ(k.reads[0].role, Role::Input);
  EXPECT_EQ(k.writes[0].role, Role::Output);
  EXPECT_TRUE(rung.intermediates.empty());
  EXPECT_EQ(rung.output_crossings, 1);
}

TEST(Analyze, FloorPicksTheHighestRoof) {
  const Roofs roofs = hand_roofs();
  const Floor memory =
      roofline_floor({.tensor_flops = 1e9, .bytes_read = 1'000'000'000}, DType::BF16, roofs);
  EXPECT_EQ(memory.limiter, Limiter::Memory);
  EXPECT_DOUBLE_EQ(memory.seconds, 1e-3);
  const Floor matrix =
      roofline_floor({.tensor_flops = 1e13, .bytes_read = 1'000'000}, DType::BF16, roofs);
  EXPECT_EQ(matrix.limiter, Limiter::Matrix);
  EXPECT_DOUBLE_EQ(matrix.seconds, 1e-2);
}

TEST(Analyze, UnknownTensorThrows) {
  Ladder ladder = hand_ladder();
  ladder.add_rung("broken", {{"copy", 0, 0, {"A"}, {"C"}}});
  EXPECT_THROW(analyze(ladder, ladder.rung("broken"), hand_roofs()), std::invalid_argument);
  EXPECT_THROW(ladder.rung("missing"), std::invalid_argument);
}

TEST(LinearLadder, Bf16UnfusedAndCublasLt) {
  constexpr std::int64_t kSide = 4096;
  const Ladder ladder = linear_ladder(kSide, kSide, kSide, DType::BF16);
  const Roofs roofs = datasheet_roofs("GH100");
  const RungReport unfused = analyze(ladder, ladder.rung("unfused"), roofs);
  const RungReport fused = analyze(ladder, ladder.rung("cublaslt"), roofs);

  ASSERT_EQ(unfused.kernels.size(), 3u);
  EXPECT_DOUBLE_EQ(unfused.kernels[0].traffic.tensor_flops, 2.0 * kSide * kSide * kSide);
  EXPECT_EQ(unfused.kernels[0].floor.limiter, Limiter::Matrix);
  EXPECT_EQ(unfused.kernels[1].floor.limiter, Limiter::Memory);
  EXPECT_EQ(unfused.kernels[2].floor.limiter, Limiter::Memory);
  EXPECT_EQ(unfused.kernels[0].writes[0].role, Role::Intermediate);

  ASSERT_EQ(unfused.intermediates.size(), 2u);
  EXPECT_EQ(unfused.intermediates[0].tensor, "T1");
  EXPECT_EQ(unfused.intermediates[0].count(), 2);
  EXPECT_EQ(unfused.intermediates[1].tensor, "T2");
  EXPECT_EQ(unfused.intermediates[1].count(), 2);
  EXPECT_EQ(unfused.intermediate_bytes(), 4 * 32 * kMiB);
  EXPECT_EQ(unfused.output_crossings, 5);

  ASSERT_EQ(fused.kernels.size(), 1u);
  EXPECT_TRUE(fused.intermediates.empty());
  EXPECT_EQ(fused.output_crossings, 1);
  // The same flops, 4 fewer passes over the 32 MiB output.
  EXPECT_DOUBLE_EQ(fused.traffic.flops(), unfused.traffic.flops());
  EXPECT_EQ(unfused.traffic.bytes() - fused.traffic.bytes(), 4 * 32 * kMiB);
  EXPECT_LT(fused.floor_s, unfused.floor_s);
}

TEST(LinearLadder, AddingARungIsOneLine) {
  Ladder ladder = linear_ladder(256, 512, 128, DType::F16);
  const std::size_t before = ladder.rungs.size();
  ladder.add_rung("another", ladder.rung("cublaslt").kernels);
  const Roofs roofs = datasheet_roofs("GH100");
  const RungReport another = analyze(ladder, ladder.rung("another"), roofs);
  const RungReport cublaslt = analyze(ladder, ladder.rung("cublaslt"), roofs);
  EXPECT_EQ(another.traffic.bytes(), cublaslt.traffic.bytes());
  EXPECT_DOUBLE_EQ(another.floor_s, cublaslt.floor_s);
  EXPECT_EQ(analyze(ladder, roofs).size(), before + 1);
}

TEST(LinearLadder, RejectsBadShapesAndDtypes) {
  EXPECT_THROW(linear_ladder(0, 1, 1, DType::F16), std::invalid_argument);
  EXPECT_THROW(linear_ladder(1, 1, -1, DType::F16), std::invalid_argument);
  EXPECT_THROW(linear_ladder(1, 1, 1, DType::U8), std::invalid_argument);
}

TEST(LinearLadder, Fp8HasNoFloorOnGa100) {
  const Ladder ladder = linear_ladder(64, 64, 64, DType::E4M3);
  EXPECT_THROW(analyze(ladder, datasheet_roofs("GA100")), std::invalid_argument);
  EXPECT_NO_THROW(analyze(ladder, datasheet_roofs("GH100")));
}

TEST(AttentionLadder, ScoresAndCrossings) {
  const AttentionShape shape{.batch = 2, .heads = 3, .seq_q = 128, .seq_k = 256, .head_dim = 64};
  const Ladder ladder = attention_ladder(shape, Mask::None, DType::BF16);
  const std::int64_t scores = 2 * 3 * 128 * 256;
  EXPECT_EQ(ladder.elements(ladder.tensor("S")), scores);
  EXPECT_EQ(ladder.bytes(ladder.tensor("S")), scores * 2);
  EXPECT_EQ(ladder.bytes(ladder.tensor("LSE")), 2 * 3 * 128 * 4);

  const Roofs roofs = datasheet_roofs("GH100");
  const RungReport unfused = analyze(ladder, ladder.rung("unfused"), roofs);
  const RungReport flash = analyze(ladder, ladder.rung("flash"), roofs);
  // "write them out, read them back for softmax, write again, read again for the second matmul"
  ASSERT_EQ(unfused.intermediates.size(), 2u);
  EXPECT_EQ(unfused.intermediates[0].tensor, "S");
  EXPECT_EQ(unfused.intermediates[0].count(), 2);
  EXPECT_EQ(unfused.intermediates[1].tensor, "P");
  EXPECT_EQ(unfused.intermediates[1].count(), 2);
  EXPECT_EQ(unfused.intermediate_bytes(), 4 * scores * 2);
  EXPECT_TRUE(flash.intermediates.empty());
  EXPECT_EQ(unfused.output_crossings, 1);
  EXPECT_EQ(flash.output_crossings, 1);

  const double matmul_flops = 4.0 * 2 * 3 * 128 * 256 * 64;
  EXPECT_DOUBLE_EQ(unfused.traffic.tensor_flops, matmul_flops);
  EXPECT_DOUBLE_EQ(flash.traffic.tensor_flops, matmul_flops);
  const std::int64_t qkvo = 2 * 3 * (128 + 256 + 256 + 128) * 64 * 2;
  EXPECT_EQ(flash.traffic.bytes(), qkvo + 2 * 3 * 128 * 4);
  EXPECT_EQ(unfused.traffic.bytes(), qkvo + 4 * scores * 2);
}

TEST(AttentionLadder, CausalHalvesFlopsNotUnfusedBytes) {
  const AttentionShape shape{.batch = 1, .heads = 4, .seq_q = 512, .seq_k = 512, .head_dim = 128};
  const Roofs roofs = datasheet_roofs("GH100");
  const Ladder full = attention_ladder(shape, Mask::None, DType::F16);
  const Ladder causal = attention_ladder(shape, Mask::Causal, DType::F16);
  for (const std::string_view rung : {"unfused", "flash"}) {
    const RungReport f = analyze(full, full.rung(rung), roofs);
    const RungReport c = analyze(causal, causal.rung(rung), roofs);
    EXPECT_DOUBLE_EQ(c.traffic.tensor_flops, f.traffic.tensor_flops / 2) << rung;
    EXPECT_DOUBLE_EQ(c.traffic.other_flops, f.traffic.other_flops / 2) << rung;
    EXPECT_EQ(c.traffic.bytes(), f.traffic.bytes()) << rung;
  }
  EXPECT_DOUBLE_EQ(analyze(full, full.rung("flash"), roofs).traffic.tensor_flops,
                   4.0 * 4 * 512 * 512 * 128);
}

// The row ladders at the bench's default shape: 32768 rows of 4096 bf16, f32 statistics.
constexpr std::int64_t kRows = 32768;
constexpr std::int64_t kCols = 4096;
constexpr std::int64_t kBf16Bytes = 2;
constexpr std::int64_t kF32Bytes = 4;
constexpr std::int64_t kRowMatrix = kRows * kCols * kBf16Bytes;  // X, R, H, T, S, Y: 256 MiB
constexpr std::int64_t kRowVector = kCols * kBf16Bytes;          // w, b
constexpr std::int64_t kRowStat = kRows * kF32Bytes;             // mean, rstd, max, sum

struct RowRungs {
  RungReport unfused;
  RungReport fused;
};
RowRungs row_rungs(RowOp op) {
  const Ladder ladder = row_ladder(op, kRows, kCols, DType::BF16);
  const Roofs roofs = datasheet_roofs("GH100");
  return {analyze(ladder, ladder.rung("unfused"), roofs),
          analyze(ladder, ladder.rung("fused"), roofs)};
}

std::vector<std::string> kernel_names(const RungReport& rung) {
  std::vector<std::string> names;
  for (const KernelReport& k : rung.kernels) names.push_back(k.name);
  return names;
}

void expect_crossings(const Crossings& c, std::string_view tensor, std::int64_t bytes,
                      int writes, int reads) {
  EXPECT_EQ(c.tensor, tensor);
  EXPECT_EQ(c.bytes, bytes) << tensor;
  EXPECT_EQ(c.writes, writes) << tensor;
  EXPECT_EQ(c.reads, reads) << tensor;
}

TEST(RowLadder, RmsNormBf16) {
  const auto [unfused, fused] = row_rungs(RowOp::RmsNorm);
  // Fused: X and w read once, Y and rstd written once.
  EXPECT_EQ(kernel_names(fused), std::vector<std::string>{"norm_forward"});
  EXPECT_EQ(fused.traffic.bytes_read, kRowMatrix + kRowVector);
  EXPECT_EQ(fused.traffic.bytes_written, kRowMatrix + kRowStat);
  EXPECT_TRUE(fused.intermediates.empty());
  EXPECT_EQ(fused.output_crossings, 1);

  // The bench's eager chain, in launch order.
  EXPECT_EQ(kernel_names(unfused),
            (std::vector<std::string>{"row_moments", "normalize", "affine"}));
  ASSERT_EQ(unfused.intermediates.size(), 2u);
  expect_crossings(unfused.intermediates[0], "rstd", kRowStat, 1, 1);
  expect_crossings(unfused.intermediates[1], "T", kRowMatrix, 1, 1);
  EXPECT_EQ(unfused.output_crossings, 3);  // T twice, Y once
  // X read a second time, T written and read back, rstd read back.
  EXPECT_EQ(unfused.traffic.bytes() - fused.traffic.bytes(), 3 * kRowMatrix + kRowStat);
  EXPECT_EQ(fused.traffic.bytes(), 2 * 256 * kMiB + 8 * 1024 + 128 * 1024);
  EXPECT_DOUBLE_EQ(fused.traffic.flops(), unfused.traffic.flops());
  EXPECT_EQ(fused.kernels[0].floor.limiter, Limiter::Memory);
}

TEST(RowLadder, LayerNormBf16) {
  const auto [unfused, fused] = row_rungs(RowOp::LayerNorm);
  EXPECT_EQ(kernel_names(fused), std::vector<std::string>{"norm_forward"});
  EXPECT_EQ(fused.traffic.bytes_read, kRowMatrix + 2 * kRowVector);   // X, w, b
  EXPECT_EQ(fused.traffic.bytes_written, kRowMatrix + 2 * kRowStat);  // Y, mean, rstd
  EXPECT_TRUE(fused.intermediates.empty());
  EXPECT_EQ(fused.output_crossings, 1);

  EXPECT_EQ(kernel_names(unfused),
            (std::vector<std::string>{"row_moments", "normalize", "affine"}));
  ASSERT_EQ(unfused.intermediates.size(), 3u);
  expect_crossings(unfused.intermediates[0], "mean", kRowStat, 1, 1);
  expect_crossings(unfused.intermediates[1], "rstd", kRowStat, 1, 1);
  expect_crossings(unfused.intermediates[2], "T", kRowMatrix, 1, 1);
  EXPECT_EQ(unfused.output_crossings, 3);
  EXPECT_EQ(unfused.traffic.bytes() - fused.traffic.bytes(), 3 * kRowMatrix + 2 * kRowStat);
  EXPECT_DOUBLE_EQ(fused.traffic.flops(), unfused.traffic.flops());
}

TEST(RowLadder, AddRmsNormBf16) {
  const auto [unfused, fused] = row_rungs(RowOp::AddRmsNorm);
  // Fused: X, R and w read once; H, Y and rstd written once.
  EXPECT_EQ(kernel_names(fused), std::vector<std::string>{"add_norm_forward"});
  EXPECT_EQ(fused.traffic.bytes_read, 2 * kRowMatrix + kRowVector);
  EXPECT_EQ(fused.traffic.bytes_written, 2 * kRowMatrix + kRowStat);
  EXPECT_TRUE(fused.intermediates.empty());
  EXPECT_EQ(fused.output_crossings, 2);  // H and Y: both M×N outputs

  EXPECT_EQ(kernel_names(unfused),
            (std::vector<std::string>{"add", "row_moments", "normalize", "affine"}));
  ASSERT_EQ(unfused.intermediates.size(), 3u);
  expect_crossings(unfused.intermediates[0], "H", kRowMatrix, 1, 2);
  expect_crossings(unfused.intermediates[1], "rstd", kRowStat, 1, 1);
  expect_crossings(unfused.intermediates[2], "T", kRowMatrix, 1, 1);
  EXPECT_EQ(unfused.output_crossings, 6);  // H 3, T 2, Y 1
  // H read back twice, T written and read back, rstd read back.
  EXPECT_EQ(unfused.traffic.bytes() - fused.traffic.bytes(), 4 * kRowMatrix + kRowStat);
  EXPECT_DOUBLE_EQ(fused.traffic.flops(), unfused.traffic.flops());
}

TEST(RowLadder, SoftmaxBf16) {
  const auto [unfused, fused] = row_rungs(RowOp::Softmax);
  // Fused: X read once, Y written once, nothing else.
  EXPECT_EQ(kernel_names(fused), std::vector<std::string>{"softmax_forward"});
  EXPECT_EQ(fused.traffic.bytes_read, kRowMatrix);
  EXPECT_EQ(fused.traffic.bytes_written, kRowMatrix);
  EXPECT_TRUE(fused.intermediates.empty());
  EXPECT_EQ(fused.output_crossings, 1);

  EXPECT_EQ(kernel_names(unfused), (std::vector<std::string>{"scale_mask", "row_max",
                                                             "row_exp_sum", "exp_normalize"}));
  ASSERT_EQ(unfused.intermediates.size(), 3u);
  expect_crossings(unfused.intermediates[0], "S", kRowMatrix, 1, 3);
  expect_crossings(unfused.intermediates[1], "max", kRowStat, 1, 2);
  expect_crossings(unfused.intermediates[2], "sum", kRowStat, 1, 1);
  EXPECT_EQ(unfused.output_crossings, 5);  // S 4, Y 1
  EXPECT_EQ(unfused.intermediate_bytes(), 4 * kRowMatrix + 5 * kRowStat);
  EXPECT_EQ(unfused.traffic.bytes() - fused.traffic.bytes(), unfused.intermediate_bytes());
  EXPECT_DOUBLE_EQ(fused.traffic.flops(), unfused.traffic.flops());
}

TEST(RowLadder, BiasGeluResidualBf16) {
  const auto [unfused, fused] = row_rungs(RowOp::BiasGeluResidual);
  // Fused: X, b and R read once, Y written once.
  EXPECT_EQ(kernel_names(fused), std::vector<std::string>{"pointwise_chain"});
  EXPECT_EQ(fused.traffic.bytes_read, 2 * kRowMatrix + kRowVector);
  EXPECT_EQ(fused.traffic.bytes_written, kRowMatrix);
  EXPECT_TRUE(fused.intermediates.empty());

  EXPECT_EQ(kernel_names(unfused), (std::vector<std::string>{"add_bias", "gelu", "add"}));
  ASSERT_EQ(unfused.intermediates.size(), 1u);
  expect_crossings(unfused.intermediates[0], "T", kRowMatrix, 2, 2);  // written by add_bias and gelu
  // T written twice and read twice.
  EXPECT_EQ(unfused.traffic.bytes() - fused.traffic.bytes(), 4 * kRowMatrix);
  EXPECT_DOUBLE_EQ(fused.traffic.flops(), unfused.traffic.flops());
}

// What `fusekit verify` matches on: the bench's rung names, and no kernel named like a rung.
TEST(RowLadder, RungsAreTheBenchs) {
  for (const RowOp op : kRowOps) {
    const Ladder ladder = row_ladder(op, kRows, kCols, DType::BF16);
    EXPECT_EQ(ladder.name, row_op_name(op));
    ASSERT_EQ(ladder.rungs.size(), 2u) << ladder.name;
    EXPECT_EQ(ladder.rungs[0].name, "unfused");
    EXPECT_EQ(ladder.rungs[1].name, "fused");
    EXPECT_EQ(ladder.rungs[1].kernels.size(), 1u) << ladder.name;
    for (const Rung& rung : ladder.rungs) {
      for (const Kernel& k : rung.kernels) {
        EXPECT_EQ(k.tensor_flops, 0) << ladder.name << " " << k.name;
        EXPECT_NE(k.name, "unfused");
        EXPECT_NE(k.name, "fused");
      }
    }
  }
}

TEST(RowLadder, DtypesAndShapes) {
  const Ladder f32 = row_ladder(RowOp::RmsNorm, 3, 5, DType::F32);
  EXPECT_EQ(f32.bytes(f32.tensor("X")), 3 * 5 * kF32Bytes);
  EXPECT_EQ(f32.bytes(f32.tensor("w")), 5 * kF32Bytes);
  EXPECT_EQ(f32.bytes(f32.tensor("rstd")), 3 * kF32Bytes);
  const Ladder f16 = row_ladder(RowOp::Softmax, 3, 5, DType::F16);
  EXPECT_EQ(f16.bytes(f16.tensor("S")), 3 * 5 * 2);
  EXPECT_EQ(f16.bytes(f16.tensor("max")), 3 * kF32Bytes);
  EXPECT_THROW(row_ladder(RowOp::LayerNorm, 0, 5, DType::BF16), std::invalid_argument);
  EXPECT_THROW(row_ladder(RowOp::LayerNorm, 5, -1, DType::BF16), std::invalid_argument);
  EXPECT_THROW(row_ladder(RowOp::AddRmsNorm, 5, 5, DType::E4M3), std::invalid_argument);
}

TEST(ToJson, HoldsEveryField) {
  const Ladder ladder = linear_ladder(4096, 4096, 4096, DType::BF16);
  const nlohmann::json j = to_json(ladder, datasheet_roofs("GH100"));
  for (const char* key :
       {"case", "maths", "dtype", "dims", "tensors", "output", "roofs", "rungs"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["case"], "linear");
  EXPECT_EQ(j["dtype"], "bf16");
  EXPECT_EQ(j["dims"]["M"], 4096);
  EXPECT_EQ(j["roofs"]["source"], "datasheet GH100");
  EXPECT_DOUBLE_EQ(j["roofs"]["matrix_fp8_flops_per_s"].get<double>(), 1979e12);
  // unfused, then one fused rung per backend (cublaslt, portable, hopper, hopper_pp, hopper_deferred,
  // hopper_sba) and fused_gemm's own choice (auto)
  ASSERT_EQ(j["rungs"].size(), 8u);
  const nlohmann::json& unfused = j["rungs"][0];
  EXPECT_EQ(unfused["name"], "unfused");
  EXPECT_EQ(unfused["output_crossings"], 5);
  EXPECT_EQ(unfused["intermediate_bytes"], 4 * 32 * kMiB);
  EXPECT_EQ(unfused["intermediates"][0]["crossings"], 2);
  for (const char* key : {"traffic", "floor_s", "kernels", "intermediates"}) {
    EXPECT_TRUE(unfused.contains(key)) << key;
  }
  const nlohmann::json& gemm = unfused["kernels"][0];
  EXPECT_EQ(gemm["name"], "gemm");
  EXPECT_EQ(gemm["writes"][0]["role"], "intermediate");
  EXPECT_EQ(gemm["floor"]["limiter"], "matrix");
  for (const char* key :
       {"tensor_flops", "other_flops", "bytes_read", "bytes_written", "bytes", "intensity"}) {
    EXPECT_TRUE(gemm["traffic"].contains(key)) << key;
  }
  EXPECT_EQ(j["rungs"][1]["output_crossings"], 1);
  EXPECT_TRUE(
      to_json(ladder, datasheet_roofs("GA100"))["roofs"]["matrix_fp8_flops_per_s"].is_null());
}

TEST(Explain, LinearStatesTheCrossings) {
  const Ladder ladder = linear_ladder(4096, 4096, 4096, DType::BF16);
  const std::string text = explain(ladder, datasheet_roofs("GH100"));
  EXPECT_NE(text.find("Y = gelu(X·Wᵀ + b)"), std::string::npos) << text;
  EXPECT_NE(text.find("T1 (M×N, 32.0 MiB) crosses HBM 2 times"), std::string::npos) << text;
  EXPECT_NE(text.find("the M×N output crosses HBM 5 times\n"), std::string::npos) << text;
  EXPECT_NE(text.find("the M×N output crosses HBM 1 time\n"), std::string::npos) << text;
  EXPECT_NE(text.find("the M×N output crosses HBM 5 times unfused, 1 time cublaslt: "
                      "4 crossings × 32.0 MiB = 128.0 MiB saved"),
            std::string::npos)
      << text;
}

TEST(Explain, AttentionStatesTheScoreCrossings) {
  const AttentionShape shape{
      .batch = 1, .heads = 16, .seq_q = 8192, .seq_k = 8192, .head_dim = 128};
  const std::string text =
      explain(attention_ladder(shape, Mask::None, DType::BF16), datasheet_roofs("GH100"));
  EXPECT_NE(text.find("S (B×H×Sq×Sk, 2.0 GiB) crosses HBM 2 times"), std::string::npos) << text;
  EXPECT_NE(text.find("P (B×H×Sq×Sk, 2.0 GiB) crosses HBM 2 times"), std::string::npos) << text;
  EXPECT_NE(text.find("intermediates: unfused 8.0 GiB (S 2×, P 2×), flash 0 B (none)"),
            std::string::npos)
      << text;
}

TEST(Explain, RmsNormStatesTheCrossings) {
  const std::string text =
      explain(row_ladder(RowOp::RmsNorm, kRows, kCols, DType::BF16), datasheet_roofs("GH100"));
  EXPECT_NE(text.find("rmsnorm: Y = X·rstd·w"), std::string::npos) << text;
  EXPECT_NE(text.find("T (M×N, 256.0 MiB) crosses HBM 2 times"), std::string::npos) << text;
  EXPECT_NE(text.find("rstd (M, 128.0 KiB) crosses HBM 2 times"), std::string::npos) << text;
  EXPECT_NE(text.find("the M×N output crosses HBM 3 times unfused, 1 time fused: "
                      "2 crossings × 256.0 MiB = 512.0 MiB saved"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace fusekit::model

namespace fusekit::model {
namespace {

TEST(ResidualLadder, CublasLtPaysOneExtraRoundTripAndTheFusedRungsNone) {
  const Roofs roofs = datasheet_roofs("GH100");
  const Ladder ladder = residual_ladder(4096, 4096, 4096, DType::BF16);
  const std::int64_t mn_bytes = std::int64_t{4096} * 4096 * 2;
  const RungReport unfused = analyze(ladder, ladder.rung("unfused"), roofs);
  const RungReport cublaslt = analyze(ladder, ladder.rung("cublaslt"), roofs);
  const RungReport hopper = analyze(ladder, ladder.rung("hopper"), roofs);
  // Y written, and T1, T2, T3 each written and read back: 7 crossings of an M×N tensor.
  EXPECT_EQ(unfused.output_crossings, 7);
  // cuBLASLt's GELU output T3 is written and read back by the add: 3 crossings.
  EXPECT_EQ(cublaslt.output_crossings, 3);
  EXPECT_EQ(hopper.output_crossings, 1);
  EXPECT_EQ(cublaslt.intermediate_bytes(), 2 * mn_bytes);
  EXPECT_EQ(hopper.intermediate_bytes(), 0);
  // The fused rung reads X, W, b, R once and writes Y once.
  EXPECT_EQ(hopper.traffic.bytes(), 2 * (4096 * 4096 * 2 + 4096) + 2 * mn_bytes);
  EXPECT_EQ(cublaslt.traffic.bytes() - hopper.traffic.bytes(), 2 * mn_bytes);
}

}  // namespace
}  // namespace fusekit::model
