#pragma once
// Epilogue of the Hopper attention forward kernel: O = (Σ_j P_j·V_j)/ℓ rounded to T, and
// LSE = (m·c + log2 ℓ)·ln 2 per query row, c = scale·log2(e).
//
// First version: each thread stores its accumulator pairs straight from registers (4 bytes per
// store, a quad covering 16 contiguous bytes of a row). O is written once per query tile against
// a whole key loop of GEMMs, so this costs little; staging through shared memory for TMA stores
// is a later step (docs/hopper_attention.md).
#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

#include <cstdint>

#include "fusekit/device/attention/attention_params.hpp"
#include "fusekit/device/attention/sequence_view.cuh"
#include "fusekit/device/attention/sm90_softmax.cuh"
#include "fusekit/device/attention/sm90_tile_scheduler.cuh"
#include "fusekit/device/attention/sm90_tile_shape.cuh"

namespace fusekit::device::attention::sm90 {

using namespace cute;

inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kThreadsPerRow = 4;  // a quad holds one accumulator row

template <class Tile>
struct Sm90Epilogue {
  using T = typename Tile::Element;

  // `thread` counts the 256 consumer threads; rows at or past the sequence's end are not stored.
  template <class FragO>
  __device__ static void store(const FlashForwardParams& p, const SequenceView& seq, const WorkTile& work, int m0,
                               int thread, FragO& o, const OnlineSoftmax<2>& softmax) {
    typename Tile::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(thread);
    Tensor coords = rows_view(thr_pv.partition_C(make_identity_tensor(Shape<typename Tile::BlockM, typename Tile::HeadDim>{})));
    Tensor out = rows_view(o);
    T* o_tile = static_cast<T*>(p.o) + work.batch * p.o_strides.batch + (seq.q_begin + m0) * p.o_strides.token +
                work.head * p.o_strides.head;
    using Pair = cutlass::Array<T, 2>;
    cutlass::NumericArrayConverter<T, float, 2, cutlass::FloatRoundStyle::round_to_nearest> convert;
#pragma unroll
    for (int r = 0; r < size<0>(out); ++r) {
      const float sum = quad_sum(softmax.row_sum[r]);
      // NOTE: a row that sees no key has ℓ = 0: O = 0 and LSE = −∞, as in the reference.
      const float inv_sum = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int tile_row = get<0>(coords(r, 0));
      const int row = m0 + tile_row;
      if (row >= seq.seqlen_q) continue;
      T* o_row = o_tile + tile_row * p.o_strides.token;
#pragma unroll
      for (int c = 0; c < size<1>(out); c += 2) {
        cutlass::Array<float, 2> f;
        f[0] = out(r, c) * inv_sum;
        f[1] = out(r, c + 1) * inv_sum;
        *reinterpret_cast<Pair*>(o_row + get<1>(coords(r, c))) = convert(f);
      }
      if (p.lse != nullptr && thread % kThreadsPerRow == 0) {
        const float lse = sum > 0.0f ? (softmax.row_max[r] * p.scale_log2 + __log2f(sum)) * kLn2 : kMinusInf;
        p.lse[work.batch * p.lse_batch_stride + work.head * p.lse_head_stride + seq.q_begin + row] = lse;
      }
    }
  }
};

}  // namespace fusekit::device::attention::sm90
