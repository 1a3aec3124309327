#include "fusekit/model/traffic.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace fusekit::model {

namespace {

constexpr double kFlopsPerMultiplyAdd = 2;
constexpr double kBiasFlopsPerElement = 1;
// NOTE: the seeds count GELU as one flop per element ("Bias and GELU do one flop per element").
// The tanh form is nearer ten operations, one of them on the SFU, which moves neither kernel
// anywhere near the ridge; one keeps the model on the seeds' arithmetic.
constexpr double kGeluFlopsPerElement = 1;
constexpr double kResidualFlopsPerElement = 1;  // one add
// NOTE: per score: running max, subtract, exp, sum, scale by 1/ℓ. The 1/√D scale rides in the
// QKᵀ GEMM's alpha, and FlashAttention's per-block rescale of O is per row, not per score.
constexpr double kSoftmaxFlopsPerScore = 5;
// NOTE: causal attention computes half the scores, the convention FlashAttention's TFLOP/s use
// (exactly (S+1)/2S of them when Sq = Sk = S).
constexpr double kCausalFraction = 0.5;
// NOTE: the row ops' flops count per element of X; the per-row work (a division by N, a square
// root) is M operations, nothing beside M·N. Every one of these ops sits far below the ridge.
constexpr double kSumSquaresFlopsPerElement = 2;    // RMSNorm statistics: x², Σ
constexpr double kMomentsFlopsPerElement = 3;       // LayerNorm statistics: Σx, x², Σx²
constexpr double kScaleFlopsPerElement = 1;         // x·rstd, x·w, scale·x
constexpr double kShiftScaleFlopsPerElement = 2;    // (x − mean)·rstd, x·w + b
constexpr double kAddFlopsPerElement = 1;           // x + r
constexpr double kMaxFlopsPerElement = 1;           // one comparison
constexpr double kExpSumFlopsPerElement = 3;        // subtract the max, exp, add
constexpr double kExpNormalizeFlopsPerElement = 3;  // subtract the max, exp, divide by the sum
constexpr DType kRowStatDType = DType::F32;  // mean, rstd, max, sum, as the row kernels keep them

// Every fused linear rung runs the one kernel gemm_gelu_bias; a new backend's rung is a name here.
constexpr std::string_view kFusedLinearRungs[] = {"cublaslt", "portable", "hopper", "hopper_pp", "hopper_deferred",
                                                  "hopper_sba", "auto"};

constexpr std::string_view kUnfusedRung = "unfused";
constexpr std::string_view kFusedRowRung = "fused";  // the bench's name for the one-kernel rung
constexpr std::string_view kSeedFusedRung = kFusedLinearRungs[0];
constexpr std::int64_t kSeedSide = 4096;  // "At 4096×4096 in FP16"
constexpr DType kSeedDType = DType::F16;
constexpr std::int64_t kSeedSeqLen = 8192;       // "At a sequence length of 8192"
constexpr std::int64_t kSeedHeadDim = 128;       // any head dim: the score count ignores it
constexpr std::string_view kSeedChip = "GH100";  // floors are not part of the seeds' numbers

void require_extent(std::int64_t extent, std::string_view arg) {
  if (extent <= 0) {
    throw std::invalid_argument(fmt::format("{}: expected > 0, got {}", arg, extent));
  }
}

void require_float(DType dtype) {
  if (!is_float(dtype)) {
    throw std::invalid_argument(
        fmt::format("dtype: expected f32, f16, bf16, e4m3 or e5m2, got {}", dtype_name(dtype)));
  }
}

// The dtypes of the row kernels (fusekit/eager_rows.hpp, fusekit/norm.hpp).
void require_row_dtype(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) {
    throw std::invalid_argument(
        fmt::format("dtype: expected f32, f16 or bf16, got {}", dtype_name(dtype)));
  }
}

template <class Item>
const Item& find_named(const std::vector<Item>& items, std::string_view name, std::string_view what,
                       std::string_view ladder) {
  auto it =
      std::find_if(items.begin(), items.end(), [&](const Item& item) { return item.name == name; });
  if (it == items.end()) {
    throw std::invalid_argument(
        fmt::format("{}: expected one of ladder {}'s, got {}", what, ladder, name));
  }
  return *it;
}

// The tally of `tensor`, added (with no crossings yet) on its first access.
Crossings& tally_entry(std::vector<Crossings>& tally, const Ladder& ladder,
                       const std::string& tensor) {
  auto it = std::find_if(tally.begin(), tally.end(),
                         [&](const Crossings& c) { return c.tensor == tensor; });
  if (it != tally.end()) return *it;
  return tally.emplace_back(Crossings{tensor, ladder.bytes(ladder.tensor(tensor))});
}

Role role_of(const Crossings& c) {
  if (c.writes == 0) return Role::Input;
  if (c.reads == 0) return Role::Output;
  return Role::Intermediate;
}

}  // namespace

Ladder& Ladder::add_rung(std::string rung_name, std::vector<Kernel> kernels) {
  rungs.push_back(Rung{std::move(rung_name), std::move(kernels)});
  return *this;
}

std::int64_t Ladder::extent(std::string_view dim) const {
  return find_named(dims, dim, "dim", name).extent;
}

const Tensor& Ladder::tensor(std::string_view tensor_name) const {
  return find_named(tensors, tensor_name, "tensor", name);
}

const Rung& Ladder::rung(std::string_view rung_name) const {
  return find_named(rungs, rung_name, "rung", name);
}

std::int64_t Ladder::elements(const Tensor& t) const {
  std::int64_t count = 1;
  for (const std::string& dim : t.shape) count *= extent(dim);
  return count;
}

std::int64_t Ladder::bytes(const Tensor& t) const {
  return elements(t) * static_cast<std::int64_t>(dtype_size(t.dtype));
}

Ladder linear_ladder(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) {
  require_extent(m, "m");
  require_extent(n, "n");
  require_extent(k, "k");
  require_float(dtype);
  Ladder ladder{.name = "linear",
                .maths = "Y = gelu(X·Wᵀ + b)",
                .dtype = dtype,
                .dims = {{"M", m}, {"N", n}, {"K", k}},
                .tensors = {{"X", {"M", "K"}, dtype},
                            {"W", {"N", "K"}, dtype},
                            {"b", {"N"}, dtype},
                            {"T1", {"M", "N"}, dtype},
                            {"T2", {"M", "N"}, dtype},
                            {"Y", {"M", "N"}, dtype}},
                .output = "Y",
                .rungs = {}};
  const double outputs = static_cast<double>(m) * static_cast<double>(n);
  const double gemm_flops = kFlopsPerMultiplyAdd * outputs * static_cast<double>(k);
  const double bias_flops = kBiasFlopsPerElement * outputs;
  const double gelu_flops = kGeluFlopsPerElement * outputs;
  ladder.add_rung(std::string(kUnfusedRung), {{"gemm", gemm_flops, 0, {"X", "W"}, {"T1"}},
                                              {"bias_add", 0, bias_flops, {"T1", "b"}, {"T2"}},
                                              {"gelu", 0, gelu_flops, {"T2"}, {"Y"}}});
  const std::vector<Kernel> fused = {
      {"gemm_gelu_bias", gemm_flops, bias_flops + gelu_flops, {"X", "W", "b"}, {"Y"}}};
  for (std::string_view rung : kFusedLinearRungs) ladder.add_rung(std::string(rung), fused);
  return ladder;
}

Ladder residual_ladder(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) {
  Ladder ladder = linear_ladder(m, n, k, dtype);
  ladder.name = "residual";
  ladder.maths = "Y = gelu(X·Wᵀ + b) + R";
  // The linear ladder's Y becomes the GELU output T3; R is added to it.
  for (auto& t : ladder.tensors)
    if (t.name == "Y") t.name = "T3";
  ladder.tensors.push_back({"R", {"M", "N"}, dtype});
  ladder.tensors.push_back({"Y", {"M", "N"}, dtype});
  const double outputs = static_cast<double>(m) * static_cast<double>(n);
  const double gemm_flops = kFlopsPerMultiplyAdd * outputs * static_cast<double>(k);
  const double epilogue_flops = (kBiasFlopsPerElement + kGeluFlopsPerElement) * outputs;
  const double add_flops = kResidualFlopsPerElement * outputs;
  const Kernel add{"add", 0, add_flops, {"T3", "R"}, {"Y"}};
  ladder.rungs.clear();
  ladder.add_rung(std::string(kUnfusedRung),
                  {{"gemm", gemm_flops, 0, {"X", "W"}, {"T1"}},
                   {"bias_add", 0, kBiasFlopsPerElement * outputs, {"T1", "b"}, {"T2"}},
                   {"gelu", 0, kGeluFlopsPerElement * outputs, {"T2"}, {"T3"}},
                   add});
  // cuBLASLt has no residual epilogue: its best composition is GELU_BIAS, then an add kernel.
  ladder.add_rung("cublaslt", {{"gemm_gelu_bias", gemm_flops, epilogue_flops, {"X", "W", "b"}, {"T3"}}, add});
  const std::vector<Kernel> fused = {
      {"gemm_gelu_bias_residual", gemm_flops, epilogue_flops + add_flops, {"X", "W", "b", "R"}, {"Y"}}};
  for (std::string_view rung : kFusedLinearRungs)
    if (rung != "cublaslt") ladder.add_rung(std::string(rung), fused);
  return ladder;
}

Ladder attention_ladder(const AttentionShape& shape, Mask mask, DType dtype) {
  require_extent(shape.batch, "batch");
  require_extent(shape.heads, "heads");
  require_extent(shape.seq_q, "seq_q");
  require_extent(shape.seq_k, "seq_k");
  require_extent(shape.head_dim, "head_dim");
  require_float(dtype);
  // NOTE: the unfused rung keeps its scores in the input dtype, as eager PyTorch does; fp32
  // scores would double every byte of S and P below.
  Ladder ladder{
      .name = "attention",
      .maths = mask == Mask::Causal ? "O = softmax(causal(Q·Kᵀ/√D))·V" : "O = softmax(Q·Kᵀ/√D)·V",
      .dtype = dtype,
      .dims = {{"B", shape.batch},
               {"H", shape.heads},
               {"Sq", shape.seq_q},
               {"Sk", shape.seq_k},
               {"D", shape.head_dim}},
      .tensors = {{"Q", {"B", "H", "Sq", "D"}, dtype},
                  {"K", {"B", "H", "Sk", "D"}, dtype},
                  {"V", {"B", "H", "Sk", "D"}, dtype},
                  {"S", {"B", "H", "Sq", "Sk"}, dtype},
                  {"P", {"B", "H", "Sq", "Sk"}, dtype},
                  {"O", {"B", "H", "Sq", "D"}, dtype},
                  {"LSE", {"B", "H", "Sq"}, DType::F32}},
      .output = "O",
      .rungs = {}};
  // NOTE: causal halves the flops but not the unfused bytes: QKᵀ writes every score and the
  // mask is applied to them afterwards.
  const double computed = mask == Mask::Causal ? kCausalFraction : 1.0;
  const double scores = static_cast<double>(shape.batch) * static_cast<double>(shape.heads) *
                        static_cast<double>(shape.seq_q) * static_cast<double>(shape.seq_k) *
                        computed;
  const double matmul_flops = kFlopsPerMultiplyAdd * scores * static_cast<double>(shape.head_dim);
  const double softmax_flops = kSoftmaxFlopsPerScore * scores;
  ladder.add_rung(std::string(kUnfusedRung), {{"qk", matmul_flops, 0, {"Q", "K"}, {"S"}},
                                              {"softmax", 0, softmax_flops, {"S"}, {"P"}},
                                              {"pv", matmul_flops, 0, {"P", "V"}, {"O"}}});
  // NOTE: the floor counts K and V once; a real flash kernel rereads them for every block of
  // queries, mostly from L2.
  ladder.add_rung(
      "flash",
      {{"flash_attention", 2 * matmul_flops, softmax_flops, {"Q", "K", "V"}, {"O", "LSE"}}});
  return ladder;
}

std::string_view row_op_name(RowOp op) {
  switch (op) {
    case RowOp::RmsNorm: return "rmsnorm";
    case RowOp::LayerNorm: return "layernorm";
    case RowOp::AddRmsNorm: return "add_rmsnorm";
    case RowOp::Softmax: return "softmax";
    case RowOp::BiasGeluResidual: return "bias_gelu_residual";
  }
  return "?";
}

std::string_view row_op_maths(RowOp op) {
  switch (op) {
    case RowOp::RmsNorm: return "Y = X·rstd·w, rstd = 1/√(mean(X²) + ε)";
    case RowOp::LayerNorm: return "Y = (X − mean)·rstd·w + b, rstd = 1/√(var(X) + ε)";
    case RowOp::AddRmsNorm: return "H = X + R; Y = H·rstd·w, rstd = 1/√(mean(H²) + ε)";
    case RowOp::Softmax: return "Y = exp(X − max X) / Σ exp(X − max X)";
    case RowOp::BiasGeluResidual: return "Y = gelu(X + b) + R";
  }
  return "?";
}

Ladder row_ladder(RowOp op, std::int64_t rows, std::int64_t cols, DType dtype) {
  require_extent(rows, "rows");
  require_extent(cols, "cols");
  require_row_dtype(dtype);
  const auto matrix = [dtype](std::string name) {
    return Tensor{std::move(name), {"M", "N"}, dtype};
  };
  const auto column = [dtype](std::string name) { return Tensor{std::move(name), {"N"}, dtype}; };
  const auto row_stat = [](std::string name) {
    return Tensor{std::move(name), {"M"}, kRowStatDType};
  };
  const double elements = static_cast<double>(rows) * static_cast<double>(cols);

  Ladder ladder{.name = std::string(row_op_name(op)),
                .maths = std::string(row_op_maths(op)),
                .dtype = dtype,
                .dims = {{"M", rows}, {"N", cols}},
                .tensors = {},
                .output = "Y",
                .rungs = {}};
  std::vector<Kernel> unfused;
  Kernel fused;
  switch (op) {
    case RowOp::RmsNorm:
      ladder.tensors = {matrix("X"), column("w"), row_stat("rstd"), matrix("T"), matrix("Y")};
      unfused = {{"row_moments", 0, kSumSquaresFlopsPerElement * elements, {"X"}, {"rstd"}},
                 {"normalize", 0, kScaleFlopsPerElement * elements, {"X", "rstd"}, {"T"}},
                 {"affine", 0, kScaleFlopsPerElement * elements, {"T", "w"}, {"Y"}}};
      fused = {"norm_forward", 0, 0, {"X", "w"}, {"Y", "rstd"}};
      break;
    case RowOp::LayerNorm:
      ladder.tensors = {matrix("X"),    column("w"),      column("b"), row_stat("mean"),
                        row_stat("rstd"), matrix("T"), matrix("Y")};
      unfused = {
          {"row_moments", 0, kMomentsFlopsPerElement * elements, {"X"}, {"mean", "rstd"}},
          {"normalize", 0, kShiftScaleFlopsPerElement * elements, {"X", "mean", "rstd"}, {"T"}},
          {"affine", 0, kShiftScaleFlopsPerElement * elements, {"T", "w", "b"}, {"Y"}}};
      fused = {"norm_forward", 0, 0, {"X", "w", "b"}, {"Y", "mean", "rstd"}};
      break;
    case RowOp::AddRmsNorm:
      ladder.tensors = {matrix("X"),      matrix("R"), column("w"), matrix("H"),
                        row_stat("rstd"), matrix("T"), matrix("Y")};
      unfused = {{"add", 0, kAddFlopsPerElement * elements, {"X", "R"}, {"H"}},
                 {"row_moments", 0, kSumSquaresFlopsPerElement * elements, {"H"}, {"rstd"}},
                 {"normalize", 0, kScaleFlopsPerElement * elements, {"H", "rstd"}, {"T"}},
                 {"affine", 0, kScaleFlopsPerElement * elements, {"T", "w"}, {"Y"}}};
      fused = {"add_norm_forward", 0, 0, {"X", "R", "w"}, {"H", "Y", "rstd"}};
      break;
    case RowOp::Softmax:
      ladder.tensors = {matrix("X"), matrix("S"), row_stat("max"), row_stat("sum"), matrix("Y")};
      unfused = {
          {"scale_mask", 0, kScaleFlopsPerElement * elements, {"X"}, {"S"}},
          {"row_max", 0, kMaxFlopsPerElement * elements, {"S"}, {"max"}},
          {"row_exp_sum", 0, kExpSumFlopsPerElement * elements, {"S", "max"}, {"sum"}},
          {"exp_normalize", 0, kExpNormalizeFlopsPerElement * elements, {"S", "max", "sum"},
           {"Y"}}};
      fused = {"softmax_forward", 0, 0, {"X"}, {"Y"}};
      break;
    case RowOp::BiasGeluResidual:
      ladder.tensors = {matrix("X"), column("b"), matrix("R"), matrix("T"), matrix("Y")};
      unfused = {{"add_bias", 0, kBiasFlopsPerElement * elements, {"X", "b"}, {"T"}},
                 {"gelu", 0, kGeluFlopsPerElement * elements, {"T"}, {"T"}},
                 {"add", 0, kResidualFlopsPerElement * elements, {"T", "R"}, {"Y"}}};
      fused = {"pointwise_chain", 0, 0, {"X", "b", "R"}, {"Y"}};
      break;
  }
  // NOTE: the fused kernel does the chain's arithmetic (softmax's too: scaled logits, max,
  // exp-sum, exp-normalize) on a row held in registers, so its flops are the chain's; only the
  // bytes differ.
  for (const Kernel& k : unfused) fused.other_flops += k.other_flops;
  ladder.add_rung(std::string(kUnfusedRung), std::move(unfused));
  ladder.add_rung(std::string(kFusedRowRung), {std::move(fused)});
  return ladder;
}

double Traffic::intensity() const {
  return bytes() == 0 ? 0.0 : flops() / static_cast<double>(bytes());
}

Floor roofline_floor(const Traffic& traffic, DType matrix_dtype, const Roofs& roofs) {
  Floor floor;
  floor.memory_s = static_cast<double>(traffic.bytes()) / roofs.dram_bytes_per_s;
  floor.matrix_s = traffic.tensor_flops / roofs.matrix_flops_per_s(matrix_dtype);
  floor.fp32_s = traffic.other_flops / roofs.fp32_flops_per_s;
  floor.seconds = floor.memory_s;
  floor.limiter = Limiter::Memory;
  if (floor.matrix_s > floor.seconds) {
    floor.seconds = floor.matrix_s;
    floor.limiter = Limiter::Matrix;
  }
  if (floor.fp32_s > floor.seconds) {
    floor.seconds = floor.fp32_s;
    floor.limiter = Limiter::Fp32;
  }
  return floor;
}

std::int64_t RungReport::intermediate_bytes() const {
  std::int64_t total = 0;
  for (const Crossings& c : intermediates) total += c.count() * c.bytes;
  return total;
}

RungReport analyze(const Ladder& ladder, const Rung& rung, const Roofs& roofs) {
  // Count the writes and reads of every tensor first: a tensor's role depends on the whole rung.
  std::vector<Crossings> tally;
  for (const Kernel& kernel : rung.kernels) {
    for (const std::string& t : kernel.reads) ++tally_entry(tally, ladder, t).reads;
    for (const std::string& t : kernel.writes) ++tally_entry(tally, ladder, t).writes;
  }
  auto access = [&](const std::string& t) {
    const Crossings& c = tally_entry(tally, ladder, t);
    return TensorAccess{t, c.bytes, role_of(c)};
  };

  RungReport report;
  report.name = rung.name;
  for (const Kernel& kernel : rung.kernels) {
    KernelReport k;
    k.name = kernel.name;
    k.traffic.tensor_flops = kernel.tensor_flops;
    k.traffic.other_flops = kernel.other_flops;
    for (const std::string& t : kernel.reads) {
      k.reads.push_back(access(t));
      k.traffic.bytes_read += k.reads.back().bytes;
    }
    for (const std::string& t : kernel.writes) {
      k.writes.push_back(access(t));
      k.traffic.bytes_written += k.writes.back().bytes;
    }
    k.floor = roofline_floor(k.traffic, ladder.dtype, roofs);
    report.traffic.tensor_flops += k.traffic.tensor_flops;
    report.traffic.other_flops += k.traffic.other_flops;
    report.traffic.bytes_read += k.traffic.bytes_read;
    report.traffic.bytes_written += k.traffic.bytes_written;
    report.floor_s += k.floor.seconds;
    report.kernels.push_back(std::move(k));
  }

  // NOTE: the seeds' "the M×N output crosses HBM five times" counts every tensor of the output's
  // shape that the rung produces (T1, T2 and Y; not an input such as attention's Q), and shapes
  // are compared by dim names, not by byte counts, so that K = N does not make X count.
  const std::vector<std::string>& output_shape = ladder.tensor(ladder.output).shape;
  for (const Crossings& c : tally) {
    const Role role = role_of(c);
    if (role == Role::Intermediate) report.intermediates.push_back(c);
    if (role != Role::Input && ladder.tensor(c.tensor).shape == output_shape) {
      report.output_crossings += c.count();
    }
  }
  return report;
}

std::vector<RungReport> analyze(const Ladder& ladder, const Roofs& roofs) {
  std::vector<RungReport> reports;
  for (const Rung& rung : ladder.rungs) reports.push_back(analyze(ladder, rung, roofs));
  return reports;
}

SeedNumbers seed_numbers() {
  const Roofs roofs = datasheet_roofs(kSeedChip);
  const Ladder linear = linear_ladder(kSeedSide, kSeedSide, kSeedSide, kSeedDType);
  const RungReport unfused = analyze(linear, linear.rung(kUnfusedRung), roofs);
  const RungReport fused = analyze(linear, linear.rung(kSeedFusedRung), roofs);

  SeedNumbers seeds;
  // The elementwise tail: every unfused kernel that does no matmul.
  for (const KernelReport& k : unfused.kernels) {
    if (k.traffic.tensor_flops != 0) continue;
    seeds.epilogue_bytes += k.traffic.bytes();
    seeds.epilogue_flops += k.traffic.other_flops;
  }
  seeds.output_crossings_unfused = unfused.output_crossings;
  seeds.output_crossings_fused = fused.output_crossings;

  const AttentionShape one_head{
      .seq_q = kSeedSeqLen, .seq_k = kSeedSeqLen, .head_dim = kSeedHeadDim};
  const Ladder attention = attention_ladder(one_head, Mask::None, kSeedDType);
  seeds.scores_per_head = attention.elements(attention.tensor("S"));
  return seeds;
}

}  // namespace fusekit::model
