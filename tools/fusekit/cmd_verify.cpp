// fusekit verify <ladder>: the seeds' "confirm it actually fused", from hardware counters.
//   fusekit verify linear [--m --n --k] [--dtype] [--json FILE] [--svg FILE] [--flush ...]
//   fusekit verify rmsnorm|layernorm|add_rmsnorm|softmax|bias_gelu_residual [--rows --cols] [--dtype] [--json ...]
// Each rung is validated first (outputs poisoned, run, checked against the CPU reference), then
// run under the CUPTI Range Profiler with L2 swept before every kernel; the measured kernels are
// set against the traffic model and judged: tensor cores used, DRAM traffic dropped by the
// eliminated intermediates, no local-memory traffic, registers below the spill threshold.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "bench/linear.hpp"
#include "bench/norm.hpp"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/verify.hpp"
#include "tools/fusekit/commands.hpp"
#include "tools/fusekit/verify_ladder.hpp"

namespace fusekit::tools {

namespace {

constexpr std::string_view kFallbackChip = "GH100";

// Datasheet roofs of `chip`, or GH100's (said so in `source`) for a chip without a datasheet.
model::Roofs roofs_for(const std::string& chip) {
  try {
    return model::datasheet_roofs(chip);
  } catch (const std::invalid_argument&) {
    model::Roofs roofs = model::datasheet_roofs(kFallbackChip);
    roofs.source += fmt::format(" (no datasheet for {})", chip);
    return roofs;
  }
}

// What the model says about a measured rung: its rung of that name, or else one of its
// kernels run alone (the bench's "gemm" rung is the model's unfused "gemm" kernel), or nothing.
std::pair<verify::ModelMatch, std::optional<model::RungReport>> model_for(
    const model::Ladder& ladder, const model::Roofs& roofs, const std::string& rung) {
  for (const model::Rung& r : ladder.rungs) {
    if (r.name == rung) return {verify::ModelMatch::Rung, model::analyze(ladder, r, roofs)};
  }
  for (const model::Rung& r : ladder.rungs) {
    for (const model::Kernel& k : r.kernels) {
      if (k.name == rung) {
        return {verify::ModelMatch::Kernel, model::analyze(ladder, model::Rung{rung, {k}}, roofs)};
      }
    }
  }
  return {verify::ModelMatch::None, std::nullopt};
}

// The model's std::invalid_argument (a bad extent or dtype) as the CLI's error type.
template <class Make>
model::Ladder model_call(Make make) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorKind::InvalidArgument, e.what());
  }
}

void write_file(const std::string& path, const std::string& text, std::string_view option) {
  std::ofstream out(path);
  require(static_cast<bool>(out), option, "a writable file", path);
  out << text;
}

struct LinearArgs {
  std::optional<std::int64_t> m, n, k;
  std::string dtype = "bf16";
  VerifyOptions common;
};

struct RowOpArgs {
  std::int64_t rows = bench::RowOpOptions{}.rows;
  std::int64_t cols = bench::RowOpOptions{}.cols;
  std::string dtype = std::string(dtype_name(bench::RowOpOptions{}.dtype));
  VerifyOptions common;
};

// fusekit verify <row op>: the bench's eager chain and fused kernel, kernel for kernel against
// model::row_ladder.
void add_verify_row_op(CLI::App* verify, Commands& commands, model::RowOp op) {
  auto args = std::make_shared<RowOpArgs>();
  const std::string name(model::row_op_name(op));
  auto* sub = verify->add_subcommand(
      name, fmt::format("{}: the eager chain against the fused kernel", model::row_op_maths(op)));
  sub->add_option("--rows", args->rows, "rows of X and Y")->check(extent_range())->capture_default_str();
  sub->add_option("--cols", args->cols, "row length")->check(extent_range())->capture_default_str();
  sub->add_option("--dtype", args->dtype, "bf16, f16 or f32")->capture_default_str();
  add_verify_options(sub, args->common);
  commands.push_back({sub, [args, op, name] {
                        const DType dtype = parse_dtype(args->dtype, "--dtype");
                        verify::parse_flush(args->common.flush, "--flush");
                        const model::Ladder model_ladder = model_call(
                            [&] { return model::row_ladder(op, args->rows, args->cols, dtype); });
                        if (device_count() == 0) {
                          return verify_without_device(model_ladder, "verify " + name);
                        }
                        bench::RowOpOptions options;
                        options.op = op;
                        options.rows = args->rows;
                        options.cols = args->cols;
                        options.dtype = dtype;
                        options.seed = args->common.seed;
                        bench::LadderRun ladder = bench::make_row_op_ladder(options);
                        return verify_ladder(ladder, model_ladder, args->common);
                      }});
}

}  // namespace

void add_verify_options(CLI::App* sub, VerifyOptions& o) {
  sub->add_option("--json", o.json_path, "write the measurements, model and verdicts to FILE");
  sub->add_option("--svg", o.svg_path, "write the roofline chart of every kernel to FILE");
  sub->add_option("--flush", o.flush,
                  "L2 sweep before each kernel (each-kernel, via a CUPTI launch callback) or "
                  "only around each rung's run (each-run)")
      ->capture_default_str();
  sub->add_option("--tolerance", o.tolerance,
                  "allowed relative error of the measured DRAM drop against the model")
      ->capture_default_str();
  sub->add_option("--seed", o.seed, "random seed of the inputs (default: a fresh one)");
}

int verify_without_device(const model::Ladder& model_ladder, const std::string& what) {
  fmt::print("{}", model::explain(model_ladder, model::datasheet_roofs(kFallbackChip)));
  return no_device(what);
}

int verify_ladder(bench::LadderRun& bench_ladder, const model::Ladder& model_ladder,
                  const VerifyOptions& o) {
  const DeviceInfo device = current_device_info();
  const verify::Flush flush = verify::parse_flush(o.flush, "--flush");
  // NOTE: made before any rung runs, so that a machine that forbids counters says so at once.
  verify::Profiler profiler(flush);

  verify::Report report;
  report.ladder = bench_ladder.ladder;
  report.shape = bench_ladder.shape;
  report.dtype = model_ladder.dtype;
  report.device = device.name;
  report.chip = profiler.chip();
  report.flush = flush;
  report.roofs = roofs_for(profiler.chip());
  report.thresholds.dram_tolerance = o.tolerance;
  report.thresholds.baseline = bench_ladder.baseline;

  Stream stream;
  bool all_valid = true;
  for (bench::Rung& rung : bench_ladder.rungs) {
    rung.poison_outputs(stream);
    rung.run(stream);
    stream.synchronize();
    const bench::Check check = rung.check();
    fmt::print("rung {}: {} (rel_err {:.2e}, bound {:.1e}; {})\n", rung.name,
               check.passed ? "valid" : "FAILED validation, not profiled", check.rel_err,
               check.bound, check.what);
    verify::RungMeasurement m;
    m.name = rung.name;
    m.description = rung.description;
    m.flops = rung.flops;
    std::tie(m.match, m.model) = model_for(model_ladder, report.roofs, rung.name);
    if (check.passed) {
      m.kernels = profiler.profile(rung.run, stream);
    } else {
      all_valid = false;
    }
    report.rungs.push_back(std::move(m));
  }
  report.verdicts = verify::judge(report.rungs, report.thresholds);
  fmt::print("\n{}", verify::report_text(report));

  if (!o.json_path.empty()) {
    nlohmann::json json = verify::to_json(report);
    json["model"] = model::to_json(model_ladder, report.roofs);
    write_file(o.json_path, json.dump(2) + "\n", "--json");
  }
  if (!o.svg_path.empty()) write_file(o.svg_path, verify::roofline_svg(report), "--svg");

  if (!all_valid) {
    fmt::print(stderr, "fusekit: a rung failed validation; it was not profiled\n");
    return kExitCheckFailed;
  }
  const bool failed =
      std::any_of(report.verdicts.begin(), report.verdicts.end(),
                  [](const verify::Verdict& v) { return v.outcome == verify::Outcome::Fail; });
  if (failed) {
    fmt::print(stderr, "fusekit: a seed check failed (see verdicts)\n");
    return kExitVerdictFailed;
  }
  return 0;
}

void add_verify_command(CLI::App& app, Commands& commands) {
  auto* verify = app.add_subcommand(
      "verify",
      "prove fusion from hardware counters: run each rung of a ladder under CUPTI and "
      "judge it against the traffic model");
  verify->require_subcommand(1);

  for (const auto chain : {bench::LinearChain::BiasGelu, bench::LinearChain::BiasGeluResidual}) {
    const bool residual = chain == bench::LinearChain::BiasGeluResidual;
    const std::string name = residual ? "residual" : "linear";
    auto args = std::make_shared<LinearArgs>();
    auto* sub = verify->add_subcommand(
        name, residual ? "Y = gelu(X·Wᵀ + b) + R: every rung of the residual ladder"
                       : "Y = gelu(X·Wᵀ + b): every rung of the linear ladder");
    const bench::LinearShape seed_shape = bench::kLinearShapes[0];
    sub->add_option("--m", args->m, fmt::format("rows of X and Y (default {})", seed_shape.m))->check(extent_range());
    sub->add_option("--n", args->n, fmt::format("columns of Y (default {})", seed_shape.n))->check(extent_range());
    sub->add_option("--k", args->k, fmt::format("the reduced dimension (default {})", seed_shape.k))
        ->check(extent_range());
    sub->add_option("--dtype", args->dtype, "bf16 or f16")->capture_default_str();
    add_verify_options(sub, args->common);
    commands.push_back({sub, [args, seed_shape, chain, residual, name] {
                          const DType dtype = parse_dtype(args->dtype, "--dtype");
                          verify::parse_flush(args->common.flush, "--flush");
                          const bench::LinearShape shape{args->m.value_or(seed_shape.m),
                                                         args->n.value_or(seed_shape.n),
                                                         args->k.value_or(seed_shape.k)};
                          const model::Ladder model_ladder = model_call([&] {
                            return residual ? model::residual_ladder(shape.m, shape.n, shape.k, dtype)
                                            : model::linear_ladder(shape.m, shape.n, shape.k, dtype);
                          });
                          if (device_count() == 0) {
                            return verify_without_device(model_ladder, "verify " + name);
                          }
                          bench::LinearOptions options;
                          options.shape = shape;
                          options.chain = chain;
                          options.dtype = dtype;
                          options.seed = args->common.seed;
                          bench::LadderRun ladder = bench::make_linear_ladder(options);
                          return verify_ladder(ladder, model_ladder, args->common);
                        }});
  }

  for (const model::RowOp op : model::kRowOps) add_verify_row_op(verify, commands, op);
}

}  // namespace fusekit::tools
