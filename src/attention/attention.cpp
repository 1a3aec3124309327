// fusekit::attention_forward: argument checks (all before any launch), the choice of kernel
// (portable or Hopper) with its reason, then the kernel parameters and the launch for the head dim.
#include "fusekit/attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "flash_forward_launch.hpp"
#include "sm90_flash_forward_launch.hpp"

namespace fusekit {

namespace {

namespace dev = device::attention;

constexpr int kMinMajor = 8;                        // mma.sync m16n8k16 with bf16 needs sm_80
constexpr std::size_t kVectorBytes = 16;            // cp.async and the O stores move 16 bytes
constexpr std::int64_t kMaxSeqlen = dev::kNoLimit - 1;  // keeps diag ± window in an int
constexpr std::int64_t kMaxGridYZ = 65535;          // heads and sequences are grid dimensions
constexpr int kHopperMajor = 9, kHopperMinor = 0;   // sm_90a machine code runs on 9.0 only
constexpr std::int64_t kTmaMaxStrideBytes = std::int64_t{1} << 40;  // cuTensorMapEncodeTiled's bound

std::string join(std::string_view a, std::string_view b) { return std::string(a).append(b); }

// [B, S, H, D] (fixed lengths) or [total, H, D] (variable lengths).
struct TokenShape {
  std::int64_t batch = 0, seqlen = 0, heads = 0, head_dim = 0;
};

// NOTE: not check::structure, whose strides must shrink outwards: BHSD storage seen as
// [B, S, H, D] has a token stride below its head stride.
TokenShape check_tokens(std::string_view arg, const TensorView& t, bool varlen) {
  check::not_null(arg, t);
  check::dtype(arg, t, {DType::BF16, DType::F16});
  const int rank = varlen ? 3 : 4;
  require(t.rank == rank, join(arg, " rank"),
          varlen ? "3 ([total, heads, head_dim], variable lengths)" : "4 ([batch, seqlen, heads, head_dim])", t.rank);
  for (int d = 0; d < rank; ++d)
    require(t.shape[d] >= 0, join(arg, " shape[" + std::to_string(d) + "]"), ">= 0", t.shape[d]);
  require(t.stride(-1) == 1, join(arg, " innermost stride"), 1, t.stride(-1));
  check::aligned(arg, t, kVectorBytes);
  TokenShape s;
  s.batch = varlen ? 1 : t.size(0);
  s.seqlen = t.size(-3);
  s.heads = t.size(-2);
  s.head_dim = t.size(-1);
  require(s.seqlen <= kMaxSeqlen, join(arg, " tokens"), "at most " + std::to_string(kMaxSeqlen), s.seqlen);
  require(s.heads >= 1, join(arg, " heads"), ">= 1", s.heads);
  return s;
}

// The output's elements must not overlap (two CTAs would race), in any stride order: sorted by
// stride, each dimension steps past the extent of the ones inside it.
void check_no_overlap(std::string_view arg, const TensorView& t) {
  std::array<int, kMaxRank> dims{};
  // NOTE: an insertion sort of the (at most kMaxRank) dimensions: std::sort over part of the
  // array, inlined into a constant-propagated copy, trips GCC 12's -Warray-bounds.
  for (int d = 0; d < t.rank; ++d) {
    int i = d;
    for (; i > 0 && t.strides[dims[static_cast<std::size_t>(i - 1)]] > t.strides[d]; --i)
      dims[static_cast<std::size_t>(i)] = dims[static_cast<std::size_t>(i - 1)];
    dims[static_cast<std::size_t>(i)] = d;
  }
  std::int64_t extent = 1;
  for (int i = 0; i < t.rank; ++i) {
    const int d = dims[static_cast<std::size_t>(i)];
    if (t.shape[d] <= 1) continue;
    require(t.strides[d] >= extent, join(arg, " stride[" + std::to_string(d) + "]"),
            ">= " + std::to_string(extent) + " (no overlapping elements)", t.strides[d]);
    extent = t.strides[d] * (t.shape[d] - 1) + extent;
  }
}

dev::TokenStrides strides_of(const TensorView& t, bool varlen) {
  return {varlen ? 0 : t.stride(0), t.stride(-3), t.stride(-2)};
}

void check_window_side(std::string_view arg, std::int64_t side) {
  require(side >= kUnboundedWindow && side <= kMaxSeqlen, arg,
          "kUnboundedWindow (-1) or 0 … " + std::to_string(kMaxSeqlen), side);
}

int window_side(std::int64_t side) { return side == kUnboundedWindow ? dev::kNoLimit : static_cast<int>(side); }

// What the argument checks learn, for the kernel choice and the parameters.
struct Checked {
  TokenShape q, k;
  bool varlen = false;
  std::int64_t sequences = 0, seqlen_q = 0, seqlen_k = 0;
  float scale = 0.0f;
};

// Every check that needs no device: InvalidArgument naming the argument, or Unsupported.
Checked check_arguments(const AttentionForwardArgs& a) {
  Checked c;
  c.varlen = a.varlen.has_value();
  const bool varlen = c.varlen;
  const TokenShape q = check_tokens("q", a.q, varlen);
  const TokenShape k = check_tokens("k", a.k, varlen);
  check_tokens("v", a.v, varlen);
  check_tokens("o", a.o, varlen);
  require(a.k.dtype == a.q.dtype, "k dtype", dtype_name(a.q.dtype), dtype_name(a.k.dtype));
  require(a.v.dtype == a.q.dtype, "v dtype", dtype_name(a.q.dtype), dtype_name(a.v.dtype));
  require(a.o.dtype == a.q.dtype, "o dtype", dtype_name(a.q.dtype), dtype_name(a.o.dtype));
  check::same_shape("o", a.o, "q", a.q);
  check_no_overlap("o", a.o);
  check::same_shape("v", a.v, "k", a.k);
  require(k.batch == q.batch, "k batch", q.batch, k.batch);
  require(k.head_dim == q.head_dim, "k head_dim", q.head_dim, k.head_dim);
  require(q.heads % k.heads == 0, "k heads", "a divisor of q's " + std::to_string(q.heads) + " heads", k.heads);
  const bool supported_dim =
      q.head_dim == dev::kHeadDim64 || q.head_dim == dev::kHeadDim128 || q.head_dim == dev::kHeadDim256;
  if (!supported_dim)
    throw Error(ErrorKind::Unsupported, "q head_dim: expected 64, 128 or 256, got " + std::to_string(q.head_dim));

  c.scale = a.scale.value_or(1.0f / std::sqrt(static_cast<float>(q.head_dim)));
  require(std::isfinite(c.scale) && c.scale > 0.0f, "scale", "finite and > 0", c.scale);
  if (a.softcap) require(std::isfinite(*a.softcap) && *a.softcap > 0.0f, "softcap", "finite and > 0", *a.softcap);
  require(a.causal == Causal::No || a.causal == Causal::Yes, "causal", "No or Yes", static_cast<int>(a.causal));
  check_window_side("window.left", a.window.left);
  check_window_side("window.right", a.window.right);
  require(a.sm_margin >= 0, "sm_margin", ">= 0", a.sm_margin);
  require(a.backend == AttentionBackend::Auto || a.backend == AttentionBackend::Portable ||
              a.backend == AttentionBackend::Sm90,
          "backend", "Auto, Portable or Sm90", static_cast<int>(a.backend));
  // NOTE: the portable kernel's grid is one CTA per query tile, not persistent: it cannot leave
  // SMs free, so a margin asked of it by name is refused rather than silently dropped.
  require(a.backend != AttentionBackend::Portable || a.sm_margin == 0, "sm_margin",
          "0 with backend Portable (its grid is not persistent: it cannot leave SMs free)", a.sm_margin);

  c.sequences = q.batch;
  c.seqlen_q = q.seqlen;
  c.seqlen_k = k.seqlen;
  if (varlen) {
    const VarlenBatch& b = *a.varlen;
    require(b.cu_seqlens_q != nullptr, "varlen.cu_seqlens_q", "a device pointer", "null");
    require(b.cu_seqlens_k != nullptr, "varlen.cu_seqlens_k", "a device pointer", "null");
    for (auto [name, ptr] : {std::pair{"varlen.cu_seqlens_q address", b.cu_seqlens_q},
                             {"varlen.cu_seqlens_k address", b.cu_seqlens_k}})
      require(reinterpret_cast<std::uintptr_t>(ptr) % sizeof(std::int32_t) == 0, name, "a multiple of 4 bytes",
              std::to_string(reinterpret_cast<std::uintptr_t>(ptr)));
    require(b.sequences >= 0, "varlen.sequences", ">= 0", b.sequences);
    require(b.max_seqlen_q >= 0 && b.max_seqlen_q <= q.seqlen, "varlen.max_seqlen_q",
            "0 … total_q = " + std::to_string(q.seqlen), b.max_seqlen_q);
    c.sequences = b.sequences;
    c.seqlen_q = b.max_seqlen_q;
  }
  require(c.sequences <= kMaxGridYZ, varlen ? "varlen.sequences" : "q batch", "at most 65535", c.sequences);
  require(q.heads <= kMaxGridYZ, "q heads", "at most 65535", q.heads);

  if (!a.lse.empty()) {
    check::structure("lse", a.lse);
    check::dtype("lse", a.lse, {DType::F32});
    if (varlen) {
      check::shape("lse", a.lse, {q.heads, q.seqlen});
    } else {
      check::shape("lse", a.lse, {q.batch, q.heads, q.seqlen});
    }
  }
  // Every CTA reads keys and values of other query tiles: o may not overlap them. A query tile
  // is read before its own output is written, by the CTA that writes it: o may be q's view.
  check::disjoint("o", a.o, "k", a.k, check::InPlace::Forbidden);
  check::disjoint("o", a.o, "v", a.v, check::InPlace::Forbidden);
  check::disjoint("o", a.o, "q", a.q, check::InPlace::Allowed);
  check::disjoint("lse", a.lse, "o", a.o, check::InPlace::Forbidden);
  check::disjoint_from_each("lse", a.lse, {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}});
  if (varlen) {
    // The offsets are read by every CTA, as bytes here: only where they lie matters.
    const auto offsets_bytes = static_cast<std::int64_t>((c.sequences + 1) * sizeof(std::int32_t));
    const TensorView cu_q = TensorView::contiguous(const_cast<std::int32_t*>(a.varlen->cu_seqlens_q), DType::U8,
                                                   {offsets_bytes});
    const TensorView cu_k = TensorView::contiguous(const_cast<std::int32_t*>(a.varlen->cu_seqlens_k), DType::U8,
                                                   {offsets_bytes});
    for (const auto& [arg, out] : {check::NamedView{"o", &a.o}, check::NamedView{"lse", &a.lse}})
      check::disjoint_from_each(arg, *out, {{"varlen.cu_seqlens_q", &cu_q}, {"varlen.cu_seqlens_k", &cu_k}});
  }
  c.q = q;
  c.k = k;
  return c;
}

// Why the Hopper kernel cannot run these (checked) arguments, or "" when it covers them.
std::string sm90_feature_blocker(const AttentionForwardArgs& a, const Checked& c) {
  if (c.varlen) return "variable lengths are not in the Hopper kernel yet (they need per-sequence TMA coordinates)";
  if (c.seqlen_k == 0) return "no keys (a TMA descriptor needs every extent >= 1)";
  const std::int64_t query_tiles =
      (c.seqlen_q + dev::kSm90BlockM - 1) / dev::kSm90BlockM * c.q.heads * c.sequences;
  if (query_tiles > std::numeric_limits<int>::max()) return "more than 2^31 - 1 query tiles (the tile ids are int)";
  for (const auto& [arg, t] :
       {std::pair<std::string_view, const TensorView*>{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"o", &a.o}})
    for (int d = 0; d < t->rank; ++d) {
      if (t->shape[d] <= 1) continue;  // the launch gives a dimension of extent 1 a legal stride
      const std::int64_t bytes = t->strides[d] * static_cast<std::int64_t>(t->element_size());
      if (bytes <= 0 || bytes >= kTmaMaxStrideBytes)
        return join(arg, " stride[" + std::to_string(d) + "] is not a positive TMA stride below 2^40 bytes");
    }
  return "";
}

std::string sm90_device_blocker() {
  if (device_count() == 0) return "the Hopper kernel needs an sm_90 GPU (no GPU)";
  const DeviceInfo& info = current_device_info();
  if (info.cc_major != kHopperMajor || info.cc_minor != kHopperMinor)
    return "the Hopper kernel needs an sm_90 GPU, this one is sm_" + std::to_string(info.cc_major * 10 + info.cc_minor);
  return "";
}

// The Hopper kernel's persistent grid must keep at least one SM. The bound is the device's: checked
// once the kernel is chosen for it, in the plan too, before any pointer is asked about.
void check_sm_margin(const AttentionForwardArgs& a) {
  const int sms = current_device_info().sm_count;
  require(a.sm_margin < sms, "sm_margin", "below the GPU's " + std::to_string(sms) + " SMs", a.sm_margin);
}

AttentionReport choose_backend(const AttentionForwardArgs& a, const Checked& c) {
  switch (a.backend) {
    case AttentionBackend::Portable: return {AttentionBackend::Portable, "requested"};
    case AttentionBackend::Sm90: {
      for (const std::string& why : {sm90_feature_blocker(a, c), sm90_device_blocker()})
        if (!why.empty()) throw Error(ErrorKind::Unsupported, "attention backend sm90: " + why);
      check_sm_margin(a);
      return {AttentionBackend::Sm90, "requested"};
    }
    case AttentionBackend::Auto: break;
  }
  // NOTE: the Hopper kernel wherever it covers the call: on the H200 it is faster than the
  // portable kernel at every head dim and mask measured (docs/performance.md: 1.4–1.9× at S = 4096).
  for (const std::string& why : {sm90_device_blocker(), sm90_feature_blocker(a, c)})
    if (!why.empty()) return {AttentionBackend::Portable, why};
  check_sm_margin(a);
  return {AttentionBackend::Sm90, "an sm_90 GPU and fixed sequence lengths: the Hopper kernel"};
}

// A stride TMA accepts for a dimension of extent 1, whose stride never moves an address: past the
// span of the whole tensor (no overlap with another dimension), in 16-byte multiples.
std::int64_t tma_stride(const TensorView& t, int d) {
  if (t.shape[d] > 1) return t.strides[d];
  constexpr auto kChunk = static_cast<std::int64_t>(kVectorBytes / sizeof(std::uint16_t));  // 16-bit elements
  std::int64_t span = 1;
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[i] > 1) span += t.strides[i] * (t.shape[i] - 1);
  return (span + kChunk - 1) / kChunk * kChunk;
}

dev::TokenStrides tma_strides_of(const TensorView& t) {
  return {tma_stride(t, 0), tma_stride(t, 1), tma_stride(t, 2)};
}

}  // namespace

std::string_view attention_backend_name(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::Auto: return "auto";
    case AttentionBackend::Portable: return "portable";
    case AttentionBackend::Sm90: return "sm90";
  }
  return "?";
}

AttentionReport plan_attention_forward(const AttentionForwardArgs& a) { return choose_backend(a, check_arguments(a)); }

AttentionReport attention_forward(const AttentionForwardArgs& a, cudaStream_t stream) {
  const Checked c = check_arguments(a);
  const AttentionReport report = choose_backend(a, c);
  const bool varlen = c.varlen;
  const TokenShape& q = c.q;
  const TokenShape& k = c.k;
  for (const auto& [arg, t] : {std::pair<std::string_view, const TensorView*>{"q", &a.q}, {"k", &a.k}, {"v", &a.v},
                               {"o", &a.o}, {"lse", &a.lse}})
    if (!t->empty()) check::on_current_device(arg, *t);
  if (varlen) {
    check::on_current_device("varlen.cu_seqlens_q", a.varlen->cu_seqlens_q);
    check::on_current_device("varlen.cu_seqlens_k", a.varlen->cu_seqlens_k);
  }
  const DeviceInfo& info = current_device_info();
  if (info.cc_major < kMinMajor)
    throw Error(ErrorKind::Unsupported, "attention_forward needs sm_80 or newer, this GPU is sm_" +
                                            std::to_string(info.cc_major * 10 + info.cc_minor));
  if (c.sequences == 0 || c.seqlen_q == 0) return report;

  dev::FlashForwardParams p;
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.q_strides = strides_of(a.q, varlen);
  p.k_strides = strides_of(a.k, varlen);
  p.v_strides = strides_of(a.v, varlen);
  p.o_strides = strides_of(a.o, varlen);
  if (!a.lse.empty()) {
    p.lse = static_cast<float*>(a.lse.data);
    p.lse_batch_stride = varlen ? 0 : a.lse.stride(0);
    p.lse_head_stride = a.lse.stride(-2);
  }
  if (varlen) {
    p.cu_seqlens_q = a.varlen->cu_seqlens_q;
    p.cu_seqlens_k = a.varlen->cu_seqlens_k;
  }
  p.seqlen_q = static_cast<int>(c.seqlen_q);
  p.seqlen_k = static_cast<int>(c.seqlen_k);
  p.heads_q = static_cast<int>(q.heads);
  p.group = static_cast<int>(q.heads / k.heads);
  const float log2e = static_cast<float>(M_LOG2E);
  p.scale_log2 = a.softcap ? *a.softcap * log2e : c.scale * log2e;
  p.softcap_scale = a.softcap ? c.scale / *a.softcap : 0.0f;
  p.window_left = window_side(a.window.left);
  // NOTE: causal is the window's right side at 0 (a narrower right side cannot be negative).
  p.window_right = a.causal == Causal::Yes ? 0 : window_side(a.window.right);

  const int seqs = static_cast<int>(c.sequences);
  if (report.backend == AttentionBackend::Sm90) {
    p.q_strides = tma_strides_of(a.q);
    p.k_strides = tma_strides_of(a.k);
    p.v_strides = tma_strides_of(a.v);
    p.o_strides = tma_strides_of(a.o);
    const attention::sm90::TensorExtents extents{seqs, static_cast<int>(k.heads)};
    const int max_ctas = info.sm_count - a.sm_margin;
    switch (q.head_dim) {
      case dev::kHeadDim64:
        attention::sm90::launch_flash_forward<dev::kHeadDim64>(p, extents, a.q.dtype, max_ctas, stream);
        break;
      case dev::kHeadDim128:
        attention::sm90::launch_flash_forward<dev::kHeadDim128>(p, extents, a.q.dtype, max_ctas, stream);
        break;
      default:
        attention::sm90::launch_flash_forward<dev::kHeadDim256>(p, extents, a.q.dtype, max_ctas, stream);
        break;
    }
    return report;
  }
  switch (q.head_dim) {
    case dev::kHeadDim64: attention::launch_flash_forward<dev::kHeadDim64>(p, a.q.dtype, seqs, stream); break;
    case dev::kHeadDim128: attention::launch_flash_forward<dev::kHeadDim128>(p, a.q.dtype, seqs, stream); break;
    default: attention::launch_flash_forward<dev::kHeadDim256>(p, a.q.dtype, seqs, stream); break;
  }
  return report;
}

}  // namespace fusekit
