// The attention reference against an explicit-probability implementation, and the properties
// that tie its features together: bottom-right causal masks with Sq ≠ Sk, GQA/MQA as MHA with
// repeated KV heads, varlen as separate sequences, and LSE as the merge rule for key splits.
#include "fusekit/reference/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "reference/random_inputs.hpp"

namespace fusekit::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTolerance = 1e-12;

struct Inputs {
  std::vector<double> q, k, v;
};

class ReferenceAttention : public RandomInputsTest {
 protected:
  Inputs random_inputs(const AttentionProblem& p) {
    return {random_vector(p.total_q() * p.heads_q * p.head_dim),
            random_vector(p.total_k() * p.heads_kv * p.head_dim),
            random_vector(p.total_k() * p.heads_kv * p.value_dim())};
  }
  std::int64_t size_in(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
};

AttentionProblem fixed_problem(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv,
                               std::int64_t seqlen_q, std::int64_t seqlen_k,
                               std::int64_t head_dim) {
  AttentionProblem p;
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  return p;
}

// Every score written out, masked entries set to −∞, probabilities from the softmax reference.
AttentionResult naive_attention(const AttentionProblem& p, const Inputs& in) {
  const std::int64_t hq = p.heads_q, hkv = p.heads_kv, d = p.head_dim, dv = p.value_dim();
  const std::int64_t total_q = p.total_q();
  AttentionResult r{std::vector<double>(total_q * hq * dv, 0.0),
                    std::vector<double>(hq * total_q, -kInf)};
  for (std::int64_t b = 0; b < p.sequences(); ++b) {
    const std::int64_t q0 = p.query_begin(b), sq = p.query_end(b) - q0;
    const std::int64_t k0 = p.key_begin(b), sk = p.key_end(b) - k0;
    for (std::int64_t h = 0; h < hq; ++h) {
      const std::int64_t kvh = h * hkv / hq;
      for (std::int64_t i = 0; i < sq; ++i) {
        Matrix s(1, sk);
        double sum_exp = 0.0;
        for (std::int64_t j = 0; j < sk; ++j) {
          double dot = 0.0;
          for (std::int64_t c = 0; c < d; ++c)
            dot += in.q[((q0 + i) * hq + h) * d + c] * in.k[((k0 + j) * hkv + kvh) * d + c];
          dot *= p.softmax_scale();
          if (p.softcap) dot = *p.softcap * std::tanh(dot / *p.softcap);
          const std::int64_t diag = i + sk - sq;
          const bool visible = (p.causal == Causal::No || j <= diag) &&
                               (p.window.left < 0 || j >= diag - p.window.left) &&
                               (p.window.right < 0 || j <= diag + p.window.right);
          s(0, j) = visible ? dot : -kInf;
          sum_exp += std::exp(s(0, j));
        }
        const Matrix prob = softmax_forward(s);
        for (std::int64_t j = 0; j < sk; ++j)
          for (std::int64_t c = 0; c < dv; ++c)
            r.o[((q0 + i) * hq + h) * dv + c] += prob(0, j) * in.v[((k0 + j) * hkv + kvh) * dv + c];
        r.lse[h * total_q + q0 + i] = std::log(sum_exp);
      }
    }
  }
  return r;
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected,
                 const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t e = 0; e < actual.size(); ++e) {
    if (std::isinf(expected[e])) {
      ASSERT_EQ(actual[e], expected[e]) << what << " at " << e;
    } else {
      ASSERT_NEAR(actual[e], expected[e], kTolerance * (1.0 + std::abs(expected[e])))
          << what << " at " << e;
    }
  }
}

void expect_same(const AttentionResult& actual, const AttentionResult& expected) {
  expect_near(actual.o, expected.o, "O");
  expect_near(actual.lse, expected.lse, "LSE");
}

TEST_F(ReferenceAttention, MatchesNaiveExplicitProbabilities) {
  struct Heads {
    std::int64_t q, kv;
  };
  const Heads heads[] = {{4, 4}, {6, 2}, {3, 1}};  // MHA, GQA, MQA
  const Window windows[] = {
      {kUnboundedWindow, kUnboundedWindow}, {3, kUnboundedWindow}, {2, 1}, {kUnboundedWindow, 2}};
  const std::optional<double> softcaps[] = {std::nullopt, 1.5};
  for (Heads hd : heads) {
    for (Causal causal : {Causal::No, Causal::Yes}) {
      for (Window window : windows) {
        for (std::optional<double> softcap : softcaps) {
          AttentionProblem p =
              fixed_problem(2, hd.q, hd.kv, size_in(1, 12), size_in(1, 12), size_in(1, 9));
          p.head_dim_v = size_in(1, 9);
          p.causal = causal;
          p.window = window;
          p.softcap = softcap;
          p.scale = 1.0 + 2.0 * std::abs(uniform_(rng_));
          SCOPED_TRACE(::testing::Message()
                       << "heads " << hd.q << "/" << hd.kv << " causal " << static_cast<int>(causal)
                       << " window " << window.left << "," << window.right << " softcap "
                       << softcap.value_or(0) << " Sq " << p.seqlen_q << " Sk " << p.seqlen_k
                       << " D " << p.head_dim << " Dv " << p.value_dim());
          const Inputs in = random_inputs(p);
          expect_same(attention_forward(p, in.q, in.k, in.v), naive_attention(p, in));
        }
      }
    }
  }
}

// Large enough to run on several threads (heads are split between them).
TEST_F(ReferenceAttention, LargeProblemMatchesNaive) {
  AttentionProblem p = fixed_problem(1, 4, 2, 290, 300, 64);
  p.causal = Causal::Yes;
  const Inputs in = random_inputs(p);
  expect_same(attention_forward(p, in.q, in.k, in.v), naive_attention(p, in));
}

// Query i of Sq sees keys 0 .. i + Sk − Sq: it equals one query attending to that key prefix.
TEST_F(ReferenceAttention, CausalMaskIsAlignedBottomRightWhenSqDiffersFromSk) {
  struct Lengths {
    std::int64_t sq, sk;
  };
  for (Lengths len : {Lengths{3, 9}, Lengths{9, 3}, Lengths{6, 6}}) {
    SCOPED_TRACE(::testing::Message() << "Sq " << len.sq << " Sk " << len.sk);
    constexpr std::int64_t kHeads = 2, kDim = 5;
    AttentionProblem p = fixed_problem(1, kHeads, kHeads, len.sq, len.sk, kDim);
    p.causal = Causal::Yes;
    const Inputs in = random_inputs(p);
    const AttentionResult r = attention_forward(p, in.q, in.k, in.v);
    for (std::int64_t i = 0; i < len.sq; ++i) {
      const std::int64_t keys = std::clamp<std::int64_t>(i + len.sk - len.sq + 1, 0, len.sk);
      AttentionProblem one = fixed_problem(1, kHeads, kHeads, 1, keys, kDim);
      const Inputs prefix{
          {in.q.begin() + i * kHeads * kDim, in.q.begin() + (i + 1) * kHeads * kDim},
          {in.k.begin(), in.k.begin() + keys * kHeads * kDim},
          {in.v.begin(), in.v.begin() + keys * kHeads * kDim}};
      const AttentionResult e = attention_forward(one, prefix.q, prefix.k, prefix.v);
      for (std::int64_t h = 0; h < kHeads; ++h) {
        EXPECT_EQ(r.lse[h * len.sq + i], keys == 0 ? -kInf : e.lse[h]) << "row " << i;
        for (std::int64_t c = 0; c < kDim; ++c)
          EXPECT_EQ(r.o[(i * kHeads + h) * kDim + c], e.o[h * kDim + c]) << "row " << i;
      }
    }
  }
}

TEST_F(ReferenceAttention, GqaAndMqaEqualMhaWithRepeatedKvHeads) {
  constexpr std::int64_t kHeadsQ = 6;
  for (std::int64_t heads_kv : {3, 2, 1}) {
    SCOPED_TRACE(::testing::Message() << "heads_kv " << heads_kv);
    AttentionProblem grouped =
        fixed_problem(2, kHeadsQ, heads_kv, size_in(1, 10), size_in(1, 10), size_in(1, 8));
    grouped.causal = Causal::Yes;
    const Inputs in = random_inputs(grouped);
    AttentionProblem mha = grouped;
    mha.heads_kv = kHeadsQ;
    // Repeat kv head g for each of the heads_q / heads_kv query heads that share it.
    const std::int64_t group = kHeadsQ / heads_kv, d = grouped.head_dim;
    Inputs repeated{in.q, {}, {}};
    for (std::int64_t t = 0; t < grouped.total_k(); ++t) {
      for (std::int64_t h = 0; h < kHeadsQ; ++h) {
        const auto from = in.k.begin() + (t * heads_kv + h / group) * d;
        repeated.k.insert(repeated.k.end(), from, from + d);
        const auto from_v = in.v.begin() + (t * heads_kv + h / group) * d;
        repeated.v.insert(repeated.v.end(), from_v, from_v + d);
      }
    }
    expect_same(attention_forward(grouped, in.q, in.k, in.v),
                attention_forward(mha, repeated.q, repeated.k, repeated.v));
  }
}

TEST_F(ReferenceAttention, VarlenEqualsSeparateSequences) {
  constexpr std::int64_t kHeadsQ = 4, kHeadsKv = 2, kDim = 6, kDimV = 3;
  const std::vector<std::int64_t> lengths_q = {5, 0, 1, 8}, lengths_k = {7, 3, 4, 8};
  AttentionProblem packed = fixed_problem(0, kHeadsQ, kHeadsKv, 0, 0, kDim);
  packed.head_dim_v = kDimV;
  packed.causal = Causal::Yes;
  packed.window = {4, kUnboundedWindow};
  packed.softcap = 2.0;
  packed.cu_seqlens_q = {0};
  packed.cu_seqlens_k = {0};
  for (std::size_t b = 0; b < lengths_q.size(); ++b) {
    packed.cu_seqlens_q.push_back(packed.cu_seqlens_q.back() + lengths_q[b]);
    packed.cu_seqlens_k.push_back(packed.cu_seqlens_k.back() + lengths_k[b]);
  }
  const Inputs in = random_inputs(packed);
  const AttentionResult r = attention_forward(packed, in.q, in.k, in.v);
  const std::int64_t total_q = packed.total_q();
  for (std::int64_t b = 0; b < packed.sequences(); ++b) {
    SCOPED_TRACE(::testing::Message() << "sequence " << b);
    AttentionProblem one = packed;
    one.cu_seqlens_q.clear();
    one.cu_seqlens_k.clear();
    one.batch = 1;
    one.seqlen_q = lengths_q[b];
    one.seqlen_k = lengths_k[b];
    const std::int64_t q0 = packed.query_begin(b), k0 = packed.key_begin(b);
    const Inputs part{
        {in.q.begin() + q0 * kHeadsQ * kDim, in.q.begin() + (q0 + one.seqlen_q) * kHeadsQ * kDim},
        {in.k.begin() + k0 * kHeadsKv * kDim, in.k.begin() + (k0 + one.seqlen_k) * kHeadsKv * kDim},
        {in.v.begin() + k0 * kHeadsKv * kDimV,
         in.v.begin() + (k0 + one.seqlen_k) * kHeadsKv * kDimV}};
    const AttentionResult e = attention_forward(one, part.q, part.k, part.v);
    for (std::int64_t i = 0; i < one.seqlen_q; ++i) {
      for (std::int64_t h = 0; h < kHeadsQ; ++h) {
        EXPECT_EQ(r.lse[h * total_q + q0 + i], e.lse[h * one.seqlen_q + i]);
        for (std::int64_t c = 0; c < kDimV; ++c)
          EXPECT_EQ(r.o[((q0 + i) * kHeadsQ + h) * kDimV + c], e.o[(i * kHeadsQ + h) * kDimV + c]);
      }
    }
  }
}

TEST_F(ReferenceAttention, FixedLengthBatchIsVarlenWithEqualLengths) {
  AttentionProblem fixed = fixed_problem(3, 2, 1, size_in(1, 7), size_in(1, 7), size_in(1, 8));
  fixed.causal = Causal::Yes;
  AttentionProblem varlen = fixed;
  varlen.batch = 0;  // ignored once cu_seqlens are given
  for (std::int64_t b = 0; b <= fixed.batch; ++b) {
    varlen.cu_seqlens_q.push_back(b * fixed.seqlen_q);
    varlen.cu_seqlens_k.push_back(b * fixed.seqlen_k);
  }
  const Inputs in = random_inputs(fixed);
  expect_same(attention_forward(varlen, in.q, in.k, in.v),
              attention_forward(fixed, in.q, in.k, in.v));
}

// Attention over keys split in two halves merges exactly through the halves' LSE:
//   lse = log(e^lse₁ + e^lse₂),  O = e^(lse₁ − lse)·O₁ + e^(lse₂ − lse)·O₂
TEST_F(ReferenceAttention, LseMergesAttentionOverSplitKeys) {
  constexpr std::int64_t kHeads = 3;
  const std::int64_t sq = size_in(1, 8), sk = size_in(2, 16), d = size_in(1, 8);
  const std::int64_t split = size_in(1, sk - 1);
  AttentionProblem whole = fixed_problem(1, kHeads, kHeads, sq, sk, d);
  whole.softcap = 3.0;
  const Inputs in = random_inputs(whole);
  AttentionProblem first = whole, second = whole;
  first.seqlen_k = split;
  second.seqlen_k = sk - split;
  const auto cut = [&](const std::vector<double>& x, std::int64_t from, std::int64_t to) {
    return std::vector<double>(x.begin() + from * kHeads * d, x.begin() + to * kHeads * d);
  };
  const AttentionResult r = attention_forward(whole, in.q, in.k, in.v);
  const AttentionResult r1 =
      attention_forward(first, in.q, cut(in.k, 0, split), cut(in.v, 0, split));
  const AttentionResult r2 =
      attention_forward(second, in.q, cut(in.k, split, sk), cut(in.v, split, sk));
  for (std::int64_t h = 0; h < kHeads; ++h) {
    for (std::int64_t i = 0; i < sq; ++i) {
      const std::size_t row = h * sq + i;
      const double lse = std::log(std::exp(r1.lse[row]) + std::exp(r2.lse[row]));
      EXPECT_NEAR(r.lse[row], lse, kTolerance);
      for (std::int64_t c = 0; c < d; ++c) {
        const std::size_t at = (i * kHeads + h) * d + c;
        EXPECT_NEAR(r.o[at],
                    std::exp(r1.lse[row] - lse) * r1.o[at] + std::exp(r2.lse[row] - lse) * r2.o[at],
                    kTolerance);
      }
    }
  }
}

// With every value equal to 1, O is 1 wherever a key is visible and 0 (with LSE = −∞) where
// none is; with every score 0, LSE is the log of the number of visible keys.
TEST_F(ReferenceAttention, ConstantInputsExposeTheMaskThroughOAndLse) {
  AttentionProblem p = fixed_problem(2, 2, 2, 7, 4, 3);
  p.causal = Causal::Yes;
  p.window = {1, kUnboundedWindow};
  Inputs in = random_inputs(p);
  std::fill(in.q.begin(), in.q.end(), 0.0);
  std::fill(in.v.begin(), in.v.end(), 1.0);
  const AttentionResult r = attention_forward(p, in.q, in.k, in.v);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      // diag = i − 3; keys diag − 1 .. diag, clipped to [0, 4).
      std::int64_t visible = 0;
      for (std::int64_t j = 0; j < p.seqlen_k; ++j)
        visible += key_visible(p, i, j, p.seqlen_q, p.seqlen_k) ? 1 : 0;
      const std::int64_t diag = i + p.seqlen_k - p.seqlen_q;
      EXPECT_EQ(visible, std::max<std::int64_t>(0, std::min(diag, p.seqlen_k - 1) -
                                                       std::max<std::int64_t>(diag - 1, 0) + 1));
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const std::int64_t t = b * p.seqlen_q + i;
        EXPECT_EQ(r.lse[h * p.total_q() + t], visible ? std::log(visible) : -kInf);
        for (std::int64_t c = 0; c < p.value_dim(); ++c)
          EXPECT_NEAR(r.o[(t * p.heads_q + h) * p.value_dim() + c], visible ? 1.0 : 0.0,
                      kTolerance);
      }
    }
  }
}

TEST_F(ReferenceAttention, MasksComposeAsDocumented) {
  AttentionProblem p = fixed_problem(1, 2, 2, size_in(1, 9), size_in(1, 9), 4);
  const Inputs in = random_inputs(p);
  const AttentionResult plain = attention_forward(p, in.q, in.k, in.v);
  AttentionProblem unbounded = p;
  unbounded.window = {kUnboundedWindow, kUnboundedWindow};
  expect_same(attention_forward(unbounded, in.q, in.k, in.v), plain);
  AttentionProblem causal = p, window = p;
  causal.causal = Causal::Yes;
  window.window = {kUnboundedWindow, 0};
  expect_same(attention_forward(causal, in.q, in.k, in.v),
              attention_forward(window, in.q, in.k, in.v));
  // A causal right window is capped by the diagonal.
  causal.window = {2, 3};
  window.window = {2, 0};
  expect_same(attention_forward(causal, in.q, in.k, in.v),
              attention_forward(window, in.q, in.k, in.v));
}

TEST_F(ReferenceAttention, SoftcapBoundsTheLogits) {
  constexpr double kCap = 2.0;
  AttentionProblem p = fixed_problem(1, 2, 1, 5, 11, 8);
  p.scale = 100.0;  // logits in the hundreds without the cap
  p.softcap = kCap;
  const Inputs in = random_inputs(p);
  const AttentionResult capped = attention_forward(p, in.q, in.k, in.v);
  for (double lse : capped.lse) EXPECT_LE(lse, kCap + std::log(p.seqlen_k) + kTolerance);
  // A cap far above every logit s changes it by about s³/(3·cap²), nothing measurable.
  constexpr double kLooseCap = 1e12, kLooseTolerance = 1e-9;
  p.softcap = kLooseCap;
  const AttentionResult loose = attention_forward(p, in.q, in.k, in.v);
  p.softcap.reset();
  const AttentionResult none = attention_forward(p, in.q, in.k, in.v);
  for (std::size_t e = 0; e < none.lse.size(); ++e)
    EXPECT_NEAR(loose.lse[e], none.lse[e], kLooseTolerance);
}

TEST_F(ReferenceAttention, DefaultScaleIsInverseSquareRootOfHeadDim) {
  AttentionProblem p = fixed_problem(1, 1, 1, 4, 6, 16);
  EXPECT_EQ(p.softmax_scale(), 0.25);
  const Inputs in = random_inputs(p);
  const AttentionResult by_default = attention_forward(p, in.q, in.k, in.v);
  p.scale = 0.25;
  expect_same(attention_forward(p, in.q, in.k, in.v), by_default);
}

TEST_F(ReferenceAttention, RejectsInconsistentProblems) {
  AttentionProblem p = fixed_problem(1, 3, 2, 2, 2, 4);
  const Inputs in = random_inputs(fixed_problem(1, 3, 3, 2, 2, 4));
  EXPECT_THROW(attention_forward(p, in.q, in.k, in.v), std::invalid_argument);  // 2 ∤ 3
  p.heads_kv = 3;
  EXPECT_NO_THROW(attention_forward(p, in.q, in.k, in.v));
  p.seqlen_k = 3;
  EXPECT_THROW(attention_forward(p, in.q, in.k, in.v), std::invalid_argument);  // k too short
  p.seqlen_k = 2;
  p.cu_seqlens_q = {0, 2};
  EXPECT_THROW(attention_forward(p, in.q, in.k, in.v), std::invalid_argument);  // only q offsets
  p.cu_seqlens_k = {0, 3, 2};
  p.cu_seqlens_q = {0, 1, 2};
  EXPECT_THROW(attention_forward(p, in.q, in.k, in.v), std::invalid_argument);  // decreasing
}

}  // namespace
}  // namespace fusekit::reference
