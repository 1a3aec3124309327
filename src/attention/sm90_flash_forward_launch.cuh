#pragma once
// Definition of sm90::launch_flash_forward, included by one sm90_*.cu file per head dim.
#include <algorithm>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "fusekit/device/attention/sm90_flash_forward.cuh"
#include "fusekit/error.hpp"
#include "fusekit/runtime.hpp"
#include "sm90_flash_forward_launch.hpp"

namespace fusekit::attention::sm90 {

namespace detail {

using namespace cute;
namespace dev = device::attention;

// A [batch, seqlen, heads, head_dim] tensor as (token, dim, head, batch) for TMA; E is T or const T.
template <int kHeadDim, class E>
auto token_tensor(E* data, int seqlen, int heads, int batch, const dev::TokenStrides& s) {
  return make_tensor(make_gmem_ptr(data),
                     make_layout(make_shape(seqlen, kHeadDim, heads, batch), make_stride(s.token, _1{}, s.head, s.batch)));
}

// NOTE: a group's K and V take about an eighth of the L2, so that the CTAs of one round read few
// heads' K and V at the same time and the next groups start loading while the CTAs still on this
// one keep theirs cached. Measured on the H200 (docs/performance.md, session 4, one run, bf16):
// an eighth against a half ran D = 128 at 593 against 550 TFLOP/s (S = 4096) and 628 against 611
// (S = 8192), D = 256 at 690 against 634 (S = 8192), D = 64 and S = 16384 within ±1 %; a
// sixteenth and a sixty-fourth ran within the run's noise of an eighth.
constexpr std::size_t kL2ShareForGroup = 8;

inline bool unmasked(const device::attention::FlashForwardParams& p) {
  return p.window_left >= device::attention::kNoLimit && p.window_right >= device::attention::kNoLimit;
}
inline bool causal(const device::attention::FlashForwardParams& p) {
  return p.window_left >= device::attention::kNoLimit && p.window_right == 0;
}

// (batch, head) pairs per scheduler group: as many key/value heads as fit in the L2 share, times
// the query heads that read each; one group (all pairs) under a sliding window, whose tiles
// differ in length without the causal pairing that keeps groups balanced.
template <class T, int kHeadDim>
int group_heads(const dev::FlashForwardParams& base, const TensorExtents& extents) {
  const int pairs = base.heads_q * extents.batch;
  if (!unmasked(base) && !causal(base)) return pairs;
  const std::size_t kv_bytes = 2 * static_cast<std::size_t>(base.seqlen_k) * kHeadDim * sizeof(T);
  const std::size_t kv_heads = std::max<std::size_t>(1, current_device_info().l2_bytes / kL2ShareForGroup / kv_bytes);
  return static_cast<int>(std::min<std::size_t>(kv_heads * base.group, pairs));
}

template <class Tile>
void launch(const dev::FlashForwardParams& base, const TensorExtents& extents, int max_ctas, cudaStream_t stream) {
  using T = typename Tile::Element;
  constexpr int kHeadDim = Tile::kHeadDim;
  dev::sm90::Sm90ForwardParams<Tile> p;
  p.base = base;
  p.batch = extents.batch;
  p.heads_kv = extents.heads_kv;
  const auto keys = [&](const void* data, const dev::TokenStrides& s) {
    return token_tensor<kHeadDim>(static_cast<const T*>(data), base.seqlen_k, extents.heads_kv, extents.batch, s);
  };
  p.tma_q = make_tma_copy(SM90_TMA_LOAD{},
                          token_tensor<kHeadDim>(static_cast<const T*>(base.q), base.seqlen_q, base.heads_q,
                                                 extents.batch, base.q_strides),
                          typename Tile::SmemLayoutQ{});
  p.tma_k = make_tma_copy(SM90_TMA_LOAD{}, keys(base.k, base.k_strides), typename Tile::SmemLayoutKVStage{});
  p.tma_v = make_tma_copy(SM90_TMA_LOAD{}, keys(base.v, base.v_strides), typename Tile::SmemLayoutKVStage{});
  if constexpr (Tile::kOutput == dev::sm90::OutputPath::SharedTma)
    p.tma_o = make_tma_copy(
        SM90_TMA_STORE{},
        token_tensor<kHeadDim>(static_cast<T*>(base.o), base.seqlen_q, base.heads_q, extents.batch, base.o_strides),
        typename Tile::SmemLayoutO{});

  const auto kernel = dev::sm90::sm90_flash_forward_kernel<Tile>;
  constexpr std::size_t kSmem = dev::sm90::kSmemBytes<Tile>;
  static const bool configured = [kernel] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)),
               "cudaFuncSetAttribute (Hopper attention forward shared memory)");
    return true;
  }();
  (void)configured;
  // Persistent grid: one CTA per SM (one 384-thread CTA fits an SM), or fewer when the tiles are
  // fewer. NOTE: a grid of scheduler.units() CTAs runs one unit per CTA with the same kernel.
  p.scheduler = {(base.seqlen_q + dev::sm90::kBlockM - 1) / dev::sm90::kBlockM, base.heads_q, extents.batch,
                 group_heads<T, kHeadDim>(base, extents),
                 causal(base) ? dev::sm90::Order::CausalPairs : dev::sm90::Order::Rounds};
  const int grid = std::min({p.scheduler.units(), current_device_info().sm_count, max_ctas});
  kernel<<<grid, dev::sm90::kThreads, kSmem, stream>>>(p);
  check_launch("sm90_flash_forward_kernel");
}

// Unmasked D = 128 calls take 128 keys per tile with 2 K/V stages, which leaves room for O's
// shared-memory tile and TMA store (176 KB of shared memory). Measured on the H200 (bf16,
// docs/performance.md, session 8, every side timed alike): 677–679 TFLOP/s at S = 4096 against
// 663 for 176 keys with 2 stages (FlashAttention-3's choice, whose last tile of 48 keys wasted
// 3 % of the GEMMs) and 618–624 for 128 keys with 3 stages (no room for O's tile); within ±1 %
// of 176 keys at S = 8192 and 16384. Masked calls keep 128 keys with 3 stages.
inline constexpr int kUnmaskedBlockN = 128, kUnmaskedStages = 2;

}  // namespace detail

template <int kHeadDim>
void launch_flash_forward(const device::attention::FlashForwardParams& params, const TensorExtents& extents,
                          DType dtype, int max_ctas, cudaStream_t stream) {
  namespace dev = device::attention;
  const auto run = [&](auto element) {
    using T = decltype(element);
    if constexpr (kHeadDim == dev::kHeadDim128) {
      if (detail::unmasked(params)) {
        detail::launch<dev::sm90::Sm90ForwardShape<T, kHeadDim, detail::kUnmaskedBlockN, detail::kUnmaskedStages>>(
            params, extents, max_ctas, stream);
        return;
      }
    }
    detail::launch<dev::sm90::Sm90ForwardShape<T, kHeadDim>>(params, extents, max_ctas, stream);
  };
  if (dtype == DType::BF16) run(cutlass::bfloat16_t{});
  else run(cutlass::half_t{});
}

}  // namespace fusekit::attention::sm90
