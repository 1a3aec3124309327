#pragma once
// The attention forward cases every backend is checked on, against the double CPU reference:
// non-causal and causal, Sq < Sk and Sq > Sk (rows that see no key), GQA and MQA, sliding
// windows, soft-cap, sharp softmax (scale 1), odd lengths (S = 1000, keys not a multiple of the
// tile), BHSD strides, variable lengths from 1 to 2049, and grids limited by sm_margin (the
// Hopper kernel's CTAs then take several rounds of tiles, causal and keyless tiles among them).
// Inputs are fresh per run; O and LSE are poisoned (NaN) before every launch. Used by
// attention_forward_gpu_test.cpp (portable kernel) and sm90_attention_gpu_test.cpp (Hopper
// kernel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "bench/harness.hpp"
#include "fusekit/attention.hpp"
#include "fusekit/buffer.hpp"
#include "fusekit/error.hpp"
#include "fusekit/numerics.hpp"
#include "fusekit/reference/attention.hpp"
#include "fusekit/runtime.hpp"
#include "fusekit/transfer.hpp"
#include "support/compare.hpp"
#include "support/gpu.hpp"

namespace fusekit::attention_check {

using testing::rel_l2;

// NOTE: LSE comes from fp32 scores of the same rounded inputs: only fp32 rounding separates it
// from the reference.
inline constexpr double kLseTolerance = 1e-4;
// q and k in [-kInputRange, kInputRange]: scores of standard deviation ≈ 1.3 at the default scale.
inline constexpr float kInputRange = 2.0f;

enum class Layout : std::uint8_t { Bshd, Bhsd };

struct Case {
  std::string name;
  std::int64_t batch = 1, seqlen_q = 0, seqlen_k = 0, heads_q = 2, heads_kv = 2;
  Causal causal = Causal::No;
  Window window;
  std::optional<float> softcap;
  std::optional<float> scale;
  Layout layout = Layout::Bshd;
  std::vector<std::int64_t> varlen_q, varlen_k;  // per-sequence lengths (empty: fixed lengths)
  int ctas = 0;  // the Hopper kernel's grid, through sm_margin (0: every SM)
};

inline Case fixed(std::string name, std::int64_t batch, std::int64_t seqlen_q, std::int64_t seqlen_k, std::int64_t heads_q,
           std::int64_t heads_kv) {
  Case c;
  c.name = std::move(name);
  c.batch = batch;
  c.seqlen_q = seqlen_q;
  c.seqlen_k = seqlen_k;
  c.heads_q = heads_q;
  c.heads_kv = heads_kv;
  return c;
}

inline Case varlen(std::string name, std::int64_t heads_q, std::int64_t heads_kv, std::vector<std::int64_t> lengths_q,
            std::vector<std::int64_t> lengths_k) {
  Case c = fixed(std::move(name), 1, 0, 0, heads_q, heads_kv);
  c.varlen_q = std::move(lengths_q);
  c.varlen_k = std::move(lengths_k);
  return c;
}

inline std::vector<Case> cases() {
  std::vector<Case> all;
  all.push_back(fixed("odd length 1000", 2, 1000, 1000, 2, 2));
  all.push_back(fixed("causal 1000", 2, 1000, 1000, 2, 2));
  all.back().causal = Causal::Yes;
  all.push_back(fixed("GQA causal Sq<Sk", 1, 130, 301, 4, 2));
  all.back().causal = Causal::Yes;
  all.push_back(fixed("MQA causal Sq>Sk (rows that see no key)", 1, 300, 131, 4, 1));
  all.back().causal = Causal::Yes;
  all.push_back(fixed("MQA Sq>Sk", 1, 257, 77, 3, 1));
  all.push_back(fixed("window 100/20", 1, 513, 513, 2, 2));
  all.back().window = {100, 20};
  all.push_back(fixed("causal window 64, Sq<Sk", 1, 200, 450, 2, 2));
  all.back().causal = Causal::Yes;
  all.back().window = {64, kUnboundedWindow};
  all.push_back(fixed("window right 3 only, Sq>Sk", 1, 333, 190, 2, 2));
  all.back().window = {kUnboundedWindow, 3};
  all.push_back(fixed("softcap", 1, 190, 260, 2, 2));
  all.back().softcap = 1.5f;
  all.back().scale = 0.5f;
  all.push_back(fixed("sharp softmax, scale 1", 1, 256, 700, 2, 2));
  all.back().scale = 1.0f;
  all.push_back(fixed("BHSD strides", 2, 257, 333, 4, 2));
  all.back().causal = Causal::Yes;
  all.back().layout = Layout::Bhsd;
  // 20 query tiles of 100 rows on 9 CTAs: three rounds, the last one short.
  all.push_back(fixed("9 CTAs (sm_margin), GQA", 5, 100, 2000, 4, 2));
  all.back().ctas = 9;
  // The Hopper kernel runs a CTA's key tiles across its query tiles (a tile's last P·V beside the
  // next one's first S): long runs of causal pairs on 2 CTAs; on 1 CTA, runs cut by tiles whose
  // rows see no key (rows 0…398 of 700 against 301 keys, bottom-right causal); one key tile per
  // query tile on 3 CTAs, so that every turn crosses into the next tile.
  all.push_back(fixed("causal 1000, 2 CTAs", 2, 1000, 1000, 2, 2));
  all.back().causal = Causal::Yes;
  all.back().ctas = 2;
  all.push_back(fixed("MQA causal Sq>Sk, 1 CTA", 1, 700, 301, 4, 1));
  all.back().causal = Causal::Yes;
  all.back().ctas = 1;
  all.push_back(fixed("one key tile per query tile, 3 CTAs", 2, 700, 60, 2, 2));
  all.back().ctas = 3;
  all.push_back(varlen("varlen 1..2049", 2, 1, {1, 17, 2049, 64, 300, 0, 129}, {5, 17, 1000, 64, 1, 9, 2049}));
  all.push_back(varlen("varlen causal", 2, 2, {1, 2049, 129, 40}, {1, 2049, 300, 7}));
  all.back().causal = Causal::Yes;
  return all;
}

inline std::vector<std::int64_t> offsets(const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> cu{0};
  for (const std::int64_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

// A [B, S, H, D] view of device storage laid out as BSHD or BHSD. NOTE: fill, poison and
// download take tensors whose strides shrink outwards, so they work on the storage.
struct TokenTensor {
  DeviceTensor storage;
  TensorView view;
  Layout layout;
  TokenTensor(DType dt, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d, Layout l) : layout(l) {
    if (layout == Layout::Bshd) {
      storage = DeviceTensor(dt, {b, s, h, d});
      view = storage.view();
      return;
    }
    storage = DeviceTensor(dt, {b, h, s, d});
    view = storage.view();
    view.shape = {b, s, h, d};
    view.strides = {h * s * d, d, s * d, 1};
  }
  // The elements in [B, S, H, D] order.
  std::vector<double> download_bshd() const {
    const auto stored = download(storage);
    if (layout == Layout::Bshd) return stored;
    const auto [b, s, h, d] = view.shape;
    std::vector<double> out(stored.size());
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t si = 0; si < s; ++si)
        for (std::int64_t hi = 0; hi < h; ++hi)
          for (std::int64_t di = 0; di < d; ++di)
            out[static_cast<std::size_t>(((bi * s + si) * h + hi) * d + di)] =
                stored[static_cast<std::size_t>(((bi * h + hi) * s + si) * d + di)];
    return out;
  }
};

struct DeviceOffsets {
  DeviceBuffer buffer;
  explicit DeviceOffsets(const std::vector<std::int64_t>& cu) : buffer(cu.size() * sizeof(std::int32_t)) {
    const std::vector<std::int32_t> host(cu.begin(), cu.end());
    check_cuda(cudaMemcpy(buffer.data(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice), "upload offsets");
  }
  const std::int32_t* get() const { return static_cast<const std::int32_t*>(buffer.data()); }
};

// Which cases a backend runs (the others are left to the portable kernel).
enum class Coverage : std::uint8_t { Every, FixedLengths };

inline bool covered(Coverage coverage, const Case& c) {
  return coverage == Coverage::Every || c.varlen_q.empty();
}

// Runs every covered case on `backend` and compares O and LSE with the reference.
inline void check_backend(DType dt, int head_dim, AttentionBackend backend, Coverage coverage) {
  const auto covers = [&](const Case& c) { return covered(coverage, c); };
  const auto seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " dtype " << dtype_name(dt) << " D " << head_dim
                                    << " backend " << attention_backend_name(backend));
  for (const Case& c : cases()) {
    if (!covers(c)) continue;
    SCOPED_TRACE(c.name);
    const bool varlen = !c.varlen_q.empty();
    reference::AttentionProblem prob;
    prob.batch = c.batch;
    prob.heads_q = c.heads_q;
    prob.heads_kv = c.heads_kv;
    prob.seqlen_q = c.seqlen_q;
    prob.seqlen_k = c.seqlen_k;
    prob.head_dim = head_dim;
    prob.causal = c.causal;
    prob.window = c.window;
    if (c.scale) prob.scale = *c.scale;
    if (c.softcap) prob.softcap = *c.softcap;
    if (varlen) {
      prob.cu_seqlens_q = offsets(c.varlen_q);
      prob.cu_seqlens_k = offsets(c.varlen_k);
    }
    const std::int64_t total_q = prob.total_q(), total_k = prob.total_k();
    // Fixed lengths: [B, S, H, D]; variable lengths: [total, H, D] (one "batch" of packed tokens).
    const std::int64_t b = varlen ? 1 : c.batch;
    const std::int64_t sq = varlen ? total_q : c.seqlen_q, sk = varlen ? total_k : c.seqlen_k;
    TokenTensor q(dt, b, sq, c.heads_q, head_dim, c.layout), o(dt, b, sq, c.heads_q, head_dim, c.layout);
    TokenTensor k(dt, b, sk, c.heads_kv, head_dim, c.layout), v(dt, b, sk, c.heads_kv, head_dim, c.layout);
    DeviceTensor lse = varlen ? DeviceTensor(DType::F32, {c.heads_q, total_q})
                              : DeviceTensor(DType::F32, {c.batch, c.heads_q, c.seqlen_q});
    fill_uniform(q.storage, seed, -kInputRange, kInputRange);
    fill_uniform(k.storage, seed + 1, -kInputRange, kInputRange);
    fill_uniform(v.storage, seed + 2, -1.0f, 1.0f);
    poison(o.storage);
    poison(lse);

    AttentionForwardArgs args;
    const auto packed = [&](const TokenTensor& t) {
      if (!varlen) return t.view;
      TensorView p = t.view;  // drop the leading batch of 1
      p.rank = 3;
      p.shape = {t.view.shape[1], t.view.shape[2], t.view.shape[3], 0};
      p.strides = {t.view.strides[1], t.view.strides[2], t.view.strides[3], 0};
      return p;
    };
    args.q = packed(q);
    args.k = packed(k);
    args.v = packed(v);
    args.o = packed(o);
    args.lse = lse;
    args.scale = c.scale;
    args.causal = c.causal;
    args.window = c.window;
    args.softcap = c.softcap;
    std::optional<DeviceOffsets> cu_q, cu_k;
    if (varlen) {
      cu_q.emplace(prob.cu_seqlens_q);
      cu_k.emplace(prob.cu_seqlens_k);
      std::int64_t longest = 0;
      for (const std::int64_t n : c.varlen_q) longest = std::max(longest, n);
      args.varlen = VarlenBatch{cu_q->get(), cu_k->get(), std::ssize(c.varlen_q), longest};
    }
    args.backend = backend;
    // The portable kernel takes no margin (its grid is not persistent): it runs such cases whole.
    if (c.ctas > 0 && backend == AttentionBackend::Sm90) args.sm_margin = current_device_info().sm_count - c.ctas;
    const AttentionReport report = attention_forward(args);
    EXPECT_EQ(report.backend, backend) << report.reason;
    check_cuda(cudaDeviceSynchronize(), "attention_forward");

    // The reference sees the inputs as the kernel did: rounded to the dtype.
    const auto want = reference::attention_forward(prob, q.download_bshd(), k.download_bshd(), v.download_bshd());
    const auto got_o = o.download_bshd();
    EXPECT_LE(rel_l2(got_o, want.o), bench::tolerance(dt));
    // LSE: [B, Hq, Sq] (fixed) or [Hq, total_q] (varlen); the reference's is [Hq, total_q].
    const auto got_lse = download(lse);
    int lse_errors = 0;
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      for (std::int64_t t = 0; t < total_q; ++t) {
        const std::int64_t got_at = varlen ? h * total_q + t : ((t / c.seqlen_q) * c.heads_q + h) * c.seqlen_q + t % c.seqlen_q;
        const double w = want.lse[static_cast<std::size_t>(h * total_q + t)];
        const double g = got_lse[static_cast<std::size_t>(got_at)];
        const bool ok = std::isinf(w) ? g == w : std::abs(g - w) <= kLseTolerance * (1.0 + std::abs(w));
        if (!ok && lse_errors++ < 5) ADD_FAILURE() << "LSE head " << h << " token " << t << ": got " << g << ", want " << w;
        // A row that sees no key is exactly zero.
        if (std::isinf(w))
          for (std::int64_t d = 0; d < head_dim; ++d) {
            const auto e = static_cast<std::size_t>((t * c.heads_q + h) * head_dim + d);
            ASSERT_EQ(got_o[e], 0.0) << "row with no visible key, head " << h << " token " << t;
          }
      }
    EXPECT_EQ(lse_errors, 0);
  }
}

}  // namespace fusekit::attention_check
