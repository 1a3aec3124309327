// CPU reference of the attention forward pass (MHA/GQA/MQA, causal, sliding window, soft-cap,
// variable lengths), one query row at a time with explicit probabilities.
#include "fusekit/reference/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

namespace fusekit::reference {

namespace {

constexpr double kMasked = -std::numeric_limits<double>::infinity();
// NOTE: below this many multiply-adds per thread, starting a thread costs more than it saves.
constexpr std::int64_t kMinMacsPerThread = std::int64_t{1} << 24;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference::attention: " + what);
}

void check_offsets(std::span<const std::int64_t> cu, const char* name) {
  require(!cu.empty() && cu.front() == 0, std::string(name) + " must start at 0");
  require(std::is_sorted(cu.begin(), cu.end()), std::string(name) + " must be non-decreasing");
}

void check_problem(const AttentionProblem& p, std::span<const double> q, std::span<const double> k,
                   std::span<const double> v) {
  require(p.heads_q > 0 && p.heads_kv > 0 && p.heads_q % p.heads_kv == 0,
          "heads_kv must divide heads_q, got " + std::to_string(p.heads_q) + " and " +
              std::to_string(p.heads_kv));
  require(p.head_dim > 0 && p.value_dim() > 0, "head dimensions must be positive");
  require(p.cu_seqlens_q.empty() == p.cu_seqlens_k.empty(),
          "give both cu_seqlens_q and cu_seqlens_k, or neither");
  if (p.cu_seqlens_q.empty()) {
    require(p.batch >= 0 && p.seqlen_q >= 0 && p.seqlen_k >= 0,
            "batch and sequence lengths must be non-negative");
  } else {
    check_offsets(p.cu_seqlens_q, "cu_seqlens_q");
    check_offsets(p.cu_seqlens_k, "cu_seqlens_k");
    require(p.cu_seqlens_q.size() == p.cu_seqlens_k.size(),
            "cu_seqlens_q and cu_seqlens_k must have the same length");
  }
  require(p.window.left >= kUnboundedWindow && p.window.right >= kUnboundedWindow,
          "window sides must be >= 0 or kUnboundedWindow");
  require(!p.softcap || *p.softcap > 0.0, "softcap must be positive");
  require(std::ssize(q) == p.total_q() * p.heads_q * p.head_dim,
          "q must be [total_q, heads_q, head_dim]");
  require(std::ssize(k) == p.total_k() * p.heads_kv * p.head_dim,
          "k must be [total_k, heads_kv, head_dim]");
  require(std::ssize(v) == p.total_k() * p.heads_kv * p.value_dim(),
          "v must be [total_k, heads_kv, head_dim_v]");
}

double dot(const double* a, const double* b, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t e = 0; e < n; ++e) sum += a[e] * b[e];
  return sum;
}

}  // namespace

std::int64_t AttentionProblem::sequences() const {
  return cu_seqlens_q.empty() ? batch : std::ssize(cu_seqlens_q) - 1;
}

double AttentionProblem::softmax_scale() const {
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

std::int64_t AttentionProblem::query_begin(std::int64_t b) const {
  return cu_seqlens_q.empty() ? b * seqlen_q : cu_seqlens_q[static_cast<std::size_t>(b)];
}
std::int64_t AttentionProblem::query_end(std::int64_t b) const { return query_begin(b + 1); }
std::int64_t AttentionProblem::key_begin(std::int64_t b) const {
  return cu_seqlens_k.empty() ? b * seqlen_k : cu_seqlens_k[static_cast<std::size_t>(b)];
}
std::int64_t AttentionProblem::key_end(std::int64_t b) const { return key_begin(b + 1); }

bool key_visible(const AttentionProblem& p, std::int64_t i, std::int64_t j, std::int64_t seqlen_q,
                 std::int64_t seqlen_k) {
  const std::int64_t diag = i + seqlen_k - seqlen_q;
  if (p.causal == Causal::Yes && !causal_visible(i, j, seqlen_q, seqlen_k)) return false;
  if (p.window.left != kUnboundedWindow && j < diag - p.window.left) return false;
  return p.window.right == kUnboundedWindow || j <= diag + p.window.right;
}

AttentionResult attention_forward(const AttentionProblem& p, std::span<const double> q,
                                  std::span<const double> k, std::span<const double> v) {
  check_problem(p, q, k, v);
  const std::int64_t hq = p.heads_q, hkv = p.heads_kv, d = p.head_dim, dv = p.value_dim();
  const std::int64_t total_q = p.total_q();
  const double scale = p.softmax_scale();
  AttentionResult res{std::vector<double>(static_cast<std::size_t>(total_q * hq * dv), 0.0),
                      std::vector<double>(static_cast<std::size_t>(hq * total_q), kMasked)};

  // Query head h of every sequence; threads take interleaved heads and write disjoint rows.
  const auto work = [&](std::int64_t first_head, std::int64_t head_stride) {
    std::vector<double> logits;
    for (std::int64_t h = first_head; h < hq; h += head_stride) {
      const std::int64_t kvh = h / (hq / hkv);
      for (std::int64_t b = 0; b < p.sequences(); ++b) {
        const std::int64_t q0 = p.query_begin(b), sq = p.query_end(b) - q0;
        const std::int64_t k0 = p.key_begin(b), sk = p.key_end(b) - k0;
        for (std::int64_t i = 0; i < sq; ++i) {
          const double* q_row = q.data() + ((q0 + i) * hq + h) * d;
          logits.assign(static_cast<std::size_t>(sk), kMasked);
          double max = kMasked;
          for (std::int64_t j = 0; j < sk; ++j) {
            if (!key_visible(p, i, j, sq, sk)) continue;
            double s = scale * dot(q_row, k.data() + ((k0 + j) * hkv + kvh) * d, d);
            if (p.softcap) s = *p.softcap * std::tanh(s / *p.softcap);
            logits[static_cast<std::size_t>(j)] = s;
            max = std::max(max, s);
          }
          // NOTE: no visible key: O stays 0 and LSE −∞, a defined output rather than NaN.
          if (max == kMasked) continue;
          double sum = 0.0;
          for (double& s : logits) {
            s = std::exp(s - max);  // masked keys become exactly 0
            sum += s;
          }
          double* o_row = res.o.data() + ((q0 + i) * hq + h) * dv;
          for (std::int64_t j = 0; j < sk; ++j) {
            const double prob = logits[static_cast<std::size_t>(j)] / sum;
            const double* v_row = v.data() + ((k0 + j) * hkv + kvh) * dv;
            for (std::int64_t c = 0; c < dv; ++c) o_row[c] += prob * v_row[c];
          }
          res.lse[static_cast<std::size_t>(h * total_q + q0 + i)] = max + std::log(sum);
        }
      }
    }
  };
  std::int64_t macs = 0;
  for (std::int64_t b = 0; b < p.sequences(); ++b)
    macs += (p.query_end(b) - p.query_begin(b)) * (p.key_end(b) - p.key_begin(b)) * hq * (d + dv);
  const std::int64_t threads = std::clamp<std::int64_t>(
      std::min<std::int64_t>(std::thread::hardware_concurrency(), macs / kMinMacsPerThread), 1, hq);
  {
    std::vector<std::jthread> helpers;
    for (std::int64_t t = 1; t < threads; ++t) helpers.emplace_back(work, t, threads);
    work(0, threads);
  }  // NOTE: the helpers join here, before `res` is returned.
  return res;
}

}  // namespace fusekit::reference
