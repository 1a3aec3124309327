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

// A [batch, seqlen, heads, head_dim] tensor as (token, dim, head, batch) for TMA.
template <class T, int kHeadDim>
auto token_tensor(const void* data, int seqlen, int heads, int batch, const dev::TokenStrides& s) {
  return make_tensor(make_gmem_ptr(static_cast<const T*>(data)),
                     make_layout(make_shape(seqlen, kHeadDim, heads, batch), make_stride(s.token, _1{}, s.head, s.batch)));
}

// NOTE: the share of L2 a section's K and V may take: they stream through it while other data
// (Q, O, the other partition's copies) competes for the rest.
constexpr std::size_t kSectionL2Fraction = 4;

// (batch, head) pairs per scheduler section: whole GQA groups whose K and V (`row_bytes` per
// key row of each) fit in a quarter of L2, at least one group, at most all pairs.
inline int section_heads(const dev::FlashForwardParams& base, int batch, const DeviceInfo& device,
                         std::size_t row_bytes) {
  const std::size_t kv_head_bytes = std::max<std::size_t>(1, 2 * row_bytes * static_cast<std::size_t>(base.seqlen_k));
  const std::size_t groups = std::max<std::size_t>(1, device.l2_bytes / kSectionL2Fraction / kv_head_bytes);
  const std::size_t pairs = static_cast<std::size_t>(base.heads_q) * static_cast<std::size_t>(batch);
  return static_cast<int>(std::min(groups * static_cast<std::size_t>(base.group), pairs));
}

template <class T, int kHeadDim>
void launch(const dev::FlashForwardParams& base, const TensorExtents& extents, cudaStream_t stream) {
  using Tile = dev::sm90::Sm90ForwardShape<T, kHeadDim>;
  dev::sm90::Sm90ForwardParams<T, kHeadDim> p;
  p.base = base;
  p.batch = extents.batch;
  p.heads_kv = extents.heads_kv;
  p.tma_q = make_tma_copy(SM90_TMA_LOAD{},
                          token_tensor<T, kHeadDim>(base.q, base.seqlen_q, base.heads_q, extents.batch, base.q_strides),
                          typename Tile::SmemLayoutQ{});
  p.tma_k = make_tma_copy(SM90_TMA_LOAD{},
                          token_tensor<T, kHeadDim>(base.k, base.seqlen_k, extents.heads_kv, extents.batch, base.k_strides),
                          typename Tile::SmemLayoutKVStage{});
  p.tma_v = make_tma_copy(SM90_TMA_LOAD{},
                          token_tensor<T, kHeadDim>(base.v, base.seqlen_k, extents.heads_kv, extents.batch, base.v_strides),
                          typename Tile::SmemLayoutKVStage{});

  const auto kernel = dev::sm90::sm90_flash_forward_kernel<T, kHeadDim>;
  constexpr std::size_t kSmem = dev::sm90::kSmemBytes<T, kHeadDim>;
  static const bool configured = [kernel] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)),
               "cudaFuncSetAttribute (Hopper attention forward shared memory)");
    return true;
  }();
  (void)configured;
  // Persistent grid: one CTA per SM (one 384-thread CTA fits an SM), or fewer when the tiles are
  // fewer. NOTE: a grid of scheduler.tiles() CTAs runs one tile per CTA with the same kernel.
  const DeviceInfo& device = current_device_info();
  p.section_heads = section_heads(base, extents.batch, device, sizeof(T) * kHeadDim);
  const dev::sm90::LongestFirstScheduler scheduler{(base.seqlen_q + dev::sm90::kBlockM - 1) / dev::sm90::kBlockM,
                                                   base.heads_q, extents.batch, p.section_heads};
  const int grid = std::min(scheduler.tiles(), device.sm_count);
  kernel<<<grid, dev::sm90::kThreads, kSmem, stream>>>(p);
  check_launch("sm90_flash_forward_kernel");
}

}  // namespace detail

template <int kHeadDim>
void launch_flash_forward(const device::attention::FlashForwardParams& params, const TensorExtents& extents,
                          DType dtype, cudaStream_t stream) {
  if (dtype == DType::BF16) {
    detail::launch<cutlass::bfloat16_t, kHeadDim>(params, extents, stream);
  } else {
    detail::launch<cutlass::half_t, kHeadDim>(params, extents, stream);
  }
}

}  // namespace fusekit::attention::sm90
