// fusekit bench attention: the fused attention forward (portable and, on sm_90, Hopper kernels) at
// one shape, over the sweep (S = 512 … 16384, causal and not), or on sequences of mixed lengths
// (--varlen), each case validated on sampled rows before it is timed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

#include "bench/attention.hpp"
#include "fusekit/runtime.hpp"
#include "tools/fusekit/commands.hpp"

namespace fusekit::tools {

namespace {
constexpr double kFlopsPerGflop = 1e9;

// Which cases the ladders run: one mode, as --sweep and --varlen exclude each other.
enum class AttentionLadderMode : std::uint8_t {
  OneShape,  // --seqlen, --causal
  Sweep,     // --sweep: S = 512 … 16384, causal and not
  Varlen,    // --varlen: sequences of mixed lengths
};

struct AttentionBenchArgs {
  std::int64_t seqlen = bench::AttentionBenchOptions{}.seqlen;
  std::vector<std::int64_t> head_dims = {bench::AttentionBenchOptions{}.head_dim};
  bool causal = false;
  std::string dtype = "bf16";
  AttentionLadderMode mode = AttentionLadderMode::OneShape;
  CommonBenchOptions common;
};
}  // namespace

void add_bench_attention_command(CLI::App& bench, Commands& commands) {
  auto args = std::make_shared<AttentionBenchArgs>();
  auto* sub = bench.add_subcommand("attention", "O = softmax(Q·Kᵀ/√D)·V, B·S = 16384, H·D = 2048: portable and Hopper kernels");
  sub->add_option("--seqlen", args->seqlen, "sequence length S (B = 16384 / S)")
      ->check(extent_range())->capture_default_str();
  sub->add_option("--head-dim", args->head_dims, "head dims D, one or more of 64, 128, 256 (H = 2048 / D)")
      ->check(extent_range())->capture_default_str();
  sub->add_flag("--causal", args->causal, "causal mask (half the FLOPs)");
  sub->add_option("--dtype", args->dtype, "bf16 or f16")->capture_default_str();
  sub->add_flag_callback("--sweep", [args] { args->mode = AttentionLadderMode::Sweep; },
                         "S = 512 … 16384, causal and not (ignores --seqlen, --causal)");
  sub->add_flag_callback("--varlen", [args] { args->mode = AttentionLadderMode::Varlen; },
                         "16384 tokens as sequences of mixed lengths (ignores --seqlen)")
      ->excludes("--sweep");
  add_common_bench_options(sub, args->common);
  commands.push_back({sub, [args] {
    const DType dtype = parse_dtype(args->dtype, "--dtype");
    std::vector<bench::AttentionBenchOptions> cases;
    const auto scope = args->common.check ? bench::CheckScope::AllRows : bench::CheckScope::SampledRows;
    for (const std::int64_t d : args->head_dims) {
      if (args->mode == AttentionLadderMode::Sweep) {
        for (const Causal causal : {Causal::No, Causal::Yes})
          for (const std::int64_t s : bench::attention_sweep_seqlens())
            cases.push_back({s, d, causal, dtype, scope, args->common.seed});
      } else {
        cases.push_back({args->seqlen, d, args->causal ? Causal::Yes : Causal::No, dtype, scope, args->common.seed});
      }
    }
    for (const auto& c : cases) {
      const std::int64_t b = bench::kAttentionTokens / c.seqlen, h = bench::kAttentionModelWidth / c.head_dim;
      const char* mask = c.causal == Causal::Yes ? " causal" : "";
      if (args->mode == AttentionLadderMode::Varlen)
        fmt::print("attention varlen {} H{} D{}{} {}: {:.1f} GFLOP\n", fmt::join(bench::kVarlenLengths, "+"), h,
                   c.head_dim, mask, dtype_name(dtype),
                   bench::attention_varlen_flops(h, c.head_dim, c.causal) / kFlopsPerGflop);
      else
        fmt::print("attention B{} S{} H{} D{}{} {}: {:.1f} GFLOP\n", b, c.seqlen, h, c.head_dim, mask, dtype_name(dtype),
                   bench::attention_flops(b, h, c.seqlen, c.head_dim, c.causal) / kFlopsPerGflop);
    }
    if (device_count() == 0) return no_device("bench attention");
    return run_ladders(
        [&] {
          std::vector<bench::LadderRun> ladders;
          for (const auto& c : cases)
            ladders.push_back(args->mode == AttentionLadderMode::Varlen ? bench::make_attention_varlen_ladder(c)
                                                                        : bench::make_attention_ladder(c));
          return ladders;
        },
        args->common);
  }});
}

}  // namespace fusekit::tools
