#pragma once
// Device side of fusekit/epilogue.hpp: the chain as a kernel parameter, and its interpreter.
// Uniform nodes run on values alone (in registers, on any fragment layout); position-dependent
// nodes take the element's global (i, j), which a kernel knows only once the tile is staged
// through shared memory in a layout it chose.
#include <cstdint>

#include "fusekit/device/convert.cuh"
#include "fusekit/device/epilogue/chain_params.hpp"
#include "fusekit/device/pointwise/activation.cuh"
#include "fusekit/epilogue.hpp"

namespace fusekit::device {

// One position-independent node on one value.
__device__ __forceinline__ float apply_uniform(const ChainNode& n, float x) {
  switch (n.op) {
    case EpilogueOp::Scale: return n.p0 * x;
    case EpilogueOp::Relu: return fmaxf(x, 0.0f);
    case EpilogueOp::GeluTanh: return gelu_tanh(x);
    case EpilogueOp::GeluErf: return gelu_erf(x);
    case EpilogueOp::Silu: return silu(x);
    case EpilogueOp::Clamp: return fminf(fmaxf(x, n.p0), n.p1);
    case EpilogueOp::Cast: {
      switch (n.dtype) {
        case DType::F16: return __half2float(__float2half_rn(x));
        case DType::BF16: return __bfloat162float(__float2bfloat16_rn(x));
        case DType::E4M3: return float(float_to_e4m3(x));
        case DType::E5M2: return float(__nv_fp8_e5m2(x));
        default: return x;
      }
    }
    default: return x;
  }
}

// The uniform prefix on all kSize values of a register fragment (frag(v), v < kSize, indexed
// with constants once unrolled): each node dispatched once for the whole fragment.
// NOTE: per value, the dispatch was inlined at every value and each value's few instructions
// sat between unused cases: the portable GEMM's epilogue jumped ~2 KB per value and stalled on
// instruction fetch (ncu, session 9: 'no instruction' in 53 % of the epilogue's samples).
template <int kSize, class Fragment, class Op>
__device__ __forceinline__ void for_each_value(Fragment& frag, Op op) {
#pragma unroll
  for (int v = 0; v < kSize; ++v) frag(v) = op(frag(v));
}
template <int kSize, class Fragment>
__device__ __forceinline__ void apply_prefix_fragment(const Chain& c, Fragment& frag) {
  for (int k = 0; k < c.uniform_prefix; ++k) {
    const ChainNode n = c.nodes[k];
    switch (n.op) {
      case EpilogueOp::Scale: for_each_value<kSize>(frag, [&](float x) { return n.p0 * x; }); break;
      case EpilogueOp::Relu: for_each_value<kSize>(frag, [](float x) { return fmaxf(x, 0.0f); }); break;
      case EpilogueOp::GeluTanh: for_each_value<kSize>(frag, [](float x) { return gelu_tanh(x); }); break;
      case EpilogueOp::GeluErf: for_each_value<kSize>(frag, [](float x) { return gelu_erf(x); }); break;
      case EpilogueOp::Silu: for_each_value<kSize>(frag, [](float x) { return silu(x); }); break;
      case EpilogueOp::Clamp: for_each_value<kSize>(frag, [&](float x) { return fminf(fmaxf(x, n.p0), n.p1); }); break;
      default: for_each_value<kSize>(frag, [&](float x) { return apply_uniform(n, x); }); break;  // casts
    }
  }
}

// Nodes [first, last) on one value at global position (i, j): value by value, for the few
// values a kernel cannot hand to the block path (epilogue/chain_block.cuh), such as a row's
// last, partial 16-byte chunk. Before a gated node, j indexes the N columns of the accumulator;
// from the gated node on, the N/2 output columns, and `up` (read only by a gated node) is the
// paired up column's value that it multiplies in.
__device__ __forceinline__ float apply_range(const Chain& c, int first, int last, float x, float up,
                                             std::int64_t i, std::int64_t j) {
  for (int k = first; k < last; ++k) {
    const ChainNode& n = c.nodes[k];
    switch (n.op) {
      case EpilogueOp::AddSource: x += n.p0 * load_float(c.source, c.dtype, i * c.ld_source + j); break;
      case EpilogueOp::ColumnBias: x += load_float(c.bias, c.dtype, j); break;
      case EpilogueOp::RowScale: x *= c.row_scale[i]; break;
      case EpilogueOp::ColumnScale: x *= c.col_scale[j]; break;
      case EpilogueOp::Residual: x += load_float(c.residual, c.dtype, i * c.ld_residual + j); break;
      case EpilogueOp::SwiGlu: x = silu(x) * up; break;
      case EpilogueOp::GeGlu: x = gelu_tanh(x) * up; break;
      case EpilogueOp::StoreAux: store_float(c.aux, c.dtype, i * c.ld_aux + j, x); break;
      default: x = apply_uniform(n, x); break;
    }
  }
  return x;
}

}  // namespace fusekit::device
