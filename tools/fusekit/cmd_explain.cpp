// fusekit explain <case>: the seeds' arithmetic (flops, bytes, crossings, floors) for any shape,
// from the traffic model. Needs no GPU.
//   fusekit explain linear    [--m --n --k] [--dtype]              default: the seeds' 4096³ f16
//   fusekit explain attention [--batch --heads --seq --seq-k --head-dim --causal] [--dtype]
//                                                                  default: one head at seq 8192
//   fusekit explain rmsnorm|layernorm|add_rmsnorm|softmax|bias_gelu_residual [--rows --cols] [--dtype]
//                                                       default: the bench's 32768×4096 bf16
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "bench/norm.hpp"
#include "fusekit/error.hpp"
#include "fusekit/model/traffic.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

namespace {

constexpr double kKilo = 1e3;
constexpr double kMega = 1e6;
constexpr double kMicro = 1e-6;
constexpr double kMebi = 1024.0 * 1024.0;
constexpr std::int64_t kSeedSide = 4096;    // "At 4096×4096 in FP16"
constexpr std::int64_t kSeedSeqLen = 8192;  // "At a sequence length of 8192"
constexpr std::int64_t kSeedHeadDim = 128;

struct ExplainOptions {
  std::string dtype = "f16";
  std::string chip = "GH100";
  std::string json_path;
};

void add_explain_options(CLI::App* sub, ExplainOptions& o) {
  sub->add_option("--dtype", o.dtype, "element type: f16, bf16, e4m3, e5m2 or f32")
      ->capture_default_str();
  sub->add_option("--chip", o.chip, "datasheet roofs: GH100 (H200 SXM) or GA100 (A100 SXM)")
      ->capture_default_str();
  sub->add_option("--json", o.json_path, "also write the model as JSON to FILE");
}

// The model's std::invalid_argument (a bad extent, dtype or chip) as the CLI's error type.
template <class Make>
auto model_call(Make make) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorKind::InvalidArgument, e.what());
  }
}

std::string times(int count) { return count == 1 ? "once" : fmt::format("{} times", count); }

// NOTE: kB below a megabyte, so that a row statistic (a norm's rstd) does not print as 0.1 MB.
std::string decimal_bytes(double bytes) {
  return bytes < kMega ? fmt::format("{:.1f} kB", bytes / kKilo)
                       : fmt::format("{:.1f} MB", bytes / kMega);
}

std::string values_text(std::int64_t values) {
  const double count = static_cast<double>(values);
  return count < kMega ? fmt::format("{} values", values)
                       : fmt::format("{:.1f} million values", count / kMega);
}

// Bytes that `rung` still moves of the baseline's intermediates: one that a fused kernel keeps
// as an output (add_rmsnorm's H, a norm's rstd) is written once.
std::int64_t kept_bytes(const model::RungReport& base, const model::RungReport& rung) {
  const auto intermediate = [&](const model::TensorAccess& a) {
    return std::any_of(base.intermediates.begin(), base.intermediates.end(),
                       [&](const model::Crossings& c) { return c.tensor == a.tensor; });
  };
  std::int64_t kept = 0;
  for (const model::KernelReport& k : rung.kernels) {
    for (const std::vector<model::TensorAccess>* accesses : {&k.reads, &k.writes}) {
      for (const model::TensorAccess& a : *accesses) {
        if (intermediate(a)) kept += a.bytes;
      }
    }
  }
  return kept;
}

// The seeds' sentences, in the seeds' units (decimal MB, millions), for this shape.
std::string seeds_words(const model::Ladder& ladder, const model::Roofs& roofs) {
  const std::vector<model::RungReport> rungs = model::analyze(ladder, roofs);
  const model::RungReport& base = rungs.front();
  const model::Tensor& output = ladder.tensor(ladder.output);
  std::string shape;
  for (const std::string& d : output.shape) shape += (shape.empty() ? "" : "×") + d;

  std::string text = "\nin the seeds' words\n";
  text += fmt::format("  the {} output crosses HBM {} {}", shape, times(base.output_crossings),
                      base.name);
  for (std::size_t r = 1; r < rungs.size(); ++r) {
    text += fmt::format("; {} {}", times(rungs[r].output_crossings), rungs[r].name);
  }
  text += '\n';

  // The kernels of the baseline that do no matmul: "bias and GELU ... run at pure memory speed".
  model::Traffic tail;
  std::vector<std::string> names;
  for (const model::KernelReport& k : base.kernels) {
    if (k.traffic.tensor_flops != 0) continue;
    names.push_back(k.name);
    tail.other_flops += k.traffic.other_flops;
    tail.bytes_read += k.traffic.bytes_read;
    tail.bytes_written += k.traffic.bytes_written;
  }
  if (!names.empty()) {
    std::string joined;
    for (const std::string& n : names) joined += (joined.empty() ? "" : " + ") + n;
    text += fmt::format(
        "  {}: {} of traffic buying {:.1f} million flops ({:.2f} FLOP/B): {:.1f} µs at DRAM "
        "speed for {:.2f} µs of fp32 work\n",
        joined, decimal_bytes(static_cast<double>(tail.bytes())), tail.flops() / kMega,
        tail.intensity(), static_cast<double>(tail.bytes()) / roofs.dram_bytes_per_s / kMicro,
        tail.flops() / roofs.fp32_flops_per_s / kMicro);
  }

  // Every intermediate, and per head where the tensor has batch and head dims.
  for (const model::Crossings& c : base.intermediates) {
    const model::Tensor& t = ladder.tensor(c.tensor);
    std::int64_t heads = 1;  // batch × heads, where the tensor has those dims
    bool per_head = false;
    for (const std::string& d : t.shape) {
      if (d != "B" && d != "H") continue;
      heads *= ladder.extent(d);
      per_head = true;
    }
    const std::int64_t values = ladder.elements(t);
    text += fmt::format("  {} holds {}", c.tensor, values_text(values));
    if (per_head) {
      const std::int64_t one = values / heads;
      text += fmt::format(" (per head {} = {:.1f} Mi)", one, static_cast<double>(one) / kMebi);
    }
    text +=
        fmt::format(", {}; it crosses HBM {}: {}\n", decimal_bytes(static_cast<double>(c.bytes)),
                    times(c.count()), decimal_bytes(static_cast<double>(c.count() * c.bytes)));
  }
  if (base.intermediates.size() > 1) {
    int crossings = 0;
    for (const model::Crossings& c : base.intermediates) crossings += c.count();
    std::vector<std::string> left;
    for (std::size_t r = 1; r < rungs.size(); ++r) {
      const std::int64_t kept = kept_bytes(base, rungs[r]);
      if (kept > 0) {
        left.push_back(
            fmt::format("{} {}", rungs[r].name, decimal_bytes(static_cast<double>(kept))));
      }
    }
    text += fmt::format("  the intermediates together: {} crossings, {}, ", crossings,
                        decimal_bytes(static_cast<double>(base.intermediate_bytes())));
    text += left.empty() ? "all of it gone when fused\n"
                         : fmt::format("all but what the fused kernel writes as outputs gone "
                                       "({} left)\n",
                                       fmt::join(left, ", "));
  }
  return text;
}

int explain_ladder(const model::Ladder& ladder, const ExplainOptions& o) {
  const model::Roofs roofs = model_call([&] { return model::datasheet_roofs(o.chip); });
  fmt::print("{}", model::explain(ladder, roofs));
  fmt::print("{}", seeds_words(ladder, roofs));
  if (!o.json_path.empty()) {
    std::ofstream json(o.json_path);
    require(static_cast<bool>(json), "--json", "a writable file", o.json_path);
    json << model::to_json(ladder, roofs).dump(2) << '\n';
  }
  return 0;
}

struct LinearArgs {
  std::int64_t m = kSeedSide, n = kSeedSide, k = kSeedSide;
  ExplainOptions common;
};

struct RowOpArgs {
  std::int64_t rows = bench::RowOpOptions{}.rows;
  std::int64_t cols = bench::RowOpOptions{}.cols;
  ExplainOptions common;
};

struct AttentionArgs {
  std::int64_t batch = 1, heads = 1, seq = kSeedSeqLen, head_dim = kSeedHeadDim;
  std::optional<std::int64_t> seq_k;
  bool causal = false;
  ExplainOptions common;
};

}  // namespace

void add_explain_command(CLI::App& app, Commands& commands) {
  auto* explain = app.add_subcommand(
      "explain",
      "the seeds' arithmetic for a case at any shape: flops, bytes, crossings, floors "
      "(no GPU needed)");
  explain->require_subcommand(1);

  auto linear = std::make_shared<LinearArgs>();
  auto* lin = explain->add_subcommand("linear", "Y = gelu(X·Wᵀ + b): unfused vs cuBLASLt epilogue");
  lin->add_option("--m", linear->m, "rows of X and Y")->check(extent_range())->capture_default_str();
  lin->add_option("--n", linear->n, "columns of Y (rows of W)")->check(extent_range())->capture_default_str();
  lin->add_option("--k", linear->k, "the reduced dimension")->check(extent_range())->capture_default_str();
  add_explain_options(lin, linear->common);
  commands.push_back({lin, [linear] {
                        const DType dtype = parse_dtype(linear->common.dtype, "--dtype");
                        const model::Ladder ladder = model_call([&] {
                          return model::linear_ladder(linear->m, linear->n, linear->k, dtype);
                        });
                        return explain_ladder(ladder, linear->common);
                      }});

  auto attention = std::make_shared<AttentionArgs>();
  auto* att = explain->add_subcommand("attention", "O = softmax(Q·Kᵀ/√D)·V: unfused vs flash");
  att->add_option("--batch", attention->batch, "batch size")->check(extent_range())->capture_default_str();
  att->add_option("--heads", attention->heads, "attention heads")->check(extent_range())->capture_default_str();
  att->add_option("--seq", attention->seq, "query sequence length")->capture_default_str();
  att->add_option("--seq-k", attention->seq_k, "key/value sequence length (default: --seq)");
  att->add_option("--head-dim", attention->head_dim, "head dimension D")->check(extent_range())->capture_default_str();
  att->add_flag("--causal", attention->causal, "causal mask (half the scores computed)");
  add_explain_options(att, attention->common);
  commands.push_back(
      {att, [attention] {
         const DType dtype = parse_dtype(attention->common.dtype, "--dtype");
         const model::AttentionShape shape{.batch = attention->batch,
                                           .heads = attention->heads,
                                           .seq_q = attention->seq,
                                           .seq_k = attention->seq_k.value_or(attention->seq),
                                           .head_dim = attention->head_dim};
         const model::Ladder ladder = model_call([&] {
           return model::attention_ladder(
               shape, attention->causal ? model::Mask::Causal : model::Mask::None, dtype);
         });
         return explain_ladder(ladder, attention->common);
       }});

  for (const model::RowOp op : model::kRowOps) {
    auto row = std::make_shared<RowOpArgs>();
    row->common.dtype = dtype_name(bench::RowOpOptions{}.dtype);  // the bench's, not the seeds'
    auto* sub = explain->add_subcommand(
        std::string(model::row_op_name(op)),
        fmt::format("{}: eager chain vs fused kernel", model::row_op_maths(op)));
    sub->add_option("--rows", row->rows, "rows of X and Y")->check(extent_range())->capture_default_str();
    sub->add_option("--cols", row->cols, "row length")->check(extent_range())->capture_default_str();
    add_explain_options(sub, row->common);
    commands.push_back({sub, [row, op] {
                          const DType dtype = parse_dtype(row->common.dtype, "--dtype");
                          const model::Ladder ladder = model_call(
                              [&] { return model::row_ladder(op, row->rows, row->cols, dtype); });
                          return explain_ladder(ladder, row->common);
                        }});
  }
}

}  // namespace fusekit::tools
