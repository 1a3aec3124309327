#pragma once
// The epilogue chain on a block of 16-byte chunks held in registers: each node dispatched once
// for the whole block, the tensors it reads loaded a chunk (16 bytes) at a time. The pointwise
// chain kernel and the portable GEMM's epilogue run their chains through it.
#include <cuda_fp8.h>

#include <cstdint>

#include "fusekit/device/amax.cuh"
#include "fusekit/device/epilogue/chain.cuh"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

template <class T, int kE>
__device__ __forceinline__ Pack<T, kE> load_chunk(const T* at, Cache cache) {
  Pack<T, kE> pack;
  const auto* word = reinterpret_cast<const typename Pack<T, kE>::Word*>(at);
  pack.word = cache == Cache::Keep ? __ldg(word) : __ldcs(word);
  return pack;
}

template <class T, int kE>
__device__ inline void load_values(const T* at, float (&v)[kE], Cache cache) {
  unpack_floats<T, kE>(load_chunk<T, kE>(at, cache), v);
}

template <class T, int kE>
__device__ inline void store_values(T* at, const float (&v)[kE]) {
  __stcs(reinterpret_cast<typename Pack<T, kE>::Word*>(at), pack_floats<T, kE>(v).word);
}

// GELU (tanh form) for results of type T: the hardware tanh when T is a 16-bit type.
template <class T>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (sizeof(T) == 2) return gelu_tanh_fast(x);
  else return gelu_tanh(x);
}

// v += scale · pack, element by element in float.
template <class T, int kE>
__device__ __forceinline__ void add_pack(float (&v)[kE], const Pack<T, kE>& pack, float scale = 1.0f) {
  float t[kE];
  unpack_floats<T, kE>(pack, t);
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = fmaf(scale, t[e], v[e]);
}

// Where the values of a block of kVec chunks sit: rows `row`, columns `col` (the gate or up
// columns before a gated node, the output columns from it on); `live`: inside the matrix (a dead
// chunk repeats the last live one's position, so its values are real numbers that change no
// amax, and only its stores are skipped).
template <int kVec>
struct BlockColumns {
  std::uint32_t row[kVec];
  int col[kVec];
  bool live[kVec];
};

// The bias chunk at column `col` (read through L1: every row reads the same).
template <class T, int kE>
__device__ __forceinline__ Pack<T, kE> bias_chunk(const Chain& c, int col) {
  return load_chunk<T, kE>(static_cast<const T*>(c.bias) + col, Cache::Keep);
}

// The tensors of position-dependent nodes, read from global memory at the block's positions when
// the node runs.
template <class T, int kE, int kVec>
struct GlobalOperands {
  const Chain& c;
  const BlockColumns<kVec>& at;
  __device__ Pack<T, kE> source(int b) const {
    return load_chunk<T, kE>(static_cast<const T*>(c.source) + std::int64_t{at.row[b]} * c.ld_source + at.col[b],
                             Cache::Stream);
  }
  __device__ Pack<T, kE> bias(int b) const { return bias_chunk<T, kE>(c, at.col[b]); }
  __device__ Pack<T, kE> residual(int b) const {
    return load_chunk<T, kE>(static_cast<const T*>(c.residual) + std::int64_t{at.row[b]} * c.ld_residual + at.col[b],
                             Cache::Stream);
  }
};

// Node kOp on a block of kVec chunks (its parameters, such as a Scale's factor, read from `node`).
template <EpilogueOp kOp, class T, int kE, int kVec, class Operands>
__device__ __forceinline__ void apply_op(const Chain& c, const ChainNode& node, float (&v)[kVec][kE],
                                         const BlockColumns<kVec>& at, const Operands& operands, float& amax) {
  if constexpr (kOp == EpilogueOp::AddSource) {
#pragma unroll
    for (int b = 0; b < kVec; ++b) add_pack(v[b], operands.source(b), node.p0);
  } else if constexpr (kOp == EpilogueOp::ColumnBias) {
#pragma unroll
    for (int b = 0; b < kVec; ++b) add_pack(v[b], operands.bias(b));
  } else if constexpr (kOp == EpilogueOp::Residual) {
#pragma unroll
    for (int b = 0; b < kVec; ++b) add_pack(v[b], operands.residual(b));
  } else if constexpr (kOp == EpilogueOp::RowScale) {
#pragma unroll
    for (int b = 0; b < kVec; ++b) {
      const float scale = c.row_scale[at.row[b]];
#pragma unroll
      for (int e = 0; e < kE; ++e) v[b][e] *= scale;
    }
  } else if constexpr (kOp == EpilogueOp::ColumnScale) {
#pragma unroll
    for (int b = 0; b < kVec; ++b)
#pragma unroll
      for (int e = 0; e < kE; ++e) v[b][e] *= __ldg(c.col_scale + at.col[b] + e);
  } else if constexpr (kOp == EpilogueOp::StoreAux) {
#pragma unroll
    for (int b = 0; b < kVec; ++b)
      if (at.live[b]) store_values<T, kE>(static_cast<T*>(c.aux) + std::int64_t{at.row[b]} * c.ld_aux + at.col[b], v[b]);
  } else if constexpr (kOp == EpilogueOp::QuantizeE4M3) {
    const float scale = *c.quant_scale;
#pragma unroll
    for (int b = 0; b < kVec; ++b)
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        amax = amax_step(amax, v[b][e]);
        v[b][e] *= scale;  // rounded to e4m3 by the store
      }
  } else if constexpr (kOp == EpilogueOp::GeluTanh) {
#pragma unroll
    for (int b = 0; b < kVec; ++b)
#pragma unroll
      for (int e = 0; e < kE; ++e) v[b][e] = gelu<T>(v[b][e]);
  } else {
    // The position-independent ops (Scale, Relu, GeluErf, Silu, Clamp, Cast): apply_uniform
    // dispatches on node.op.
#pragma unroll
    for (int b = 0; b < kVec; ++b)
#pragma unroll
      for (int e = 0; e < kE; ++e) v[b][e] = apply_uniform(node, v[b][e]);
  }
}

// One node on a block of kVec chunks, dispatched at run time. NOTE: a node costs its dispatch
// once per block, not once per chunk: one chunk at a time, bias→GELU→residual executed 45
// instructions per element (ncu, session 4).
template <class T, int kE, int kVec, class Operands>
__device__ inline void apply_node(const Chain& c, const ChainNode& node, float (&v)[kVec][kE],
                                  const BlockColumns<kVec>& at, const Operands& operands, float& amax) {
  switch (node.op) {
#define FUSEKIT_CHAIN_CASE(op) \
  case EpilogueOp::op: return apply_op<EpilogueOp::op, T, kE, kVec>(c, node, v, at, operands, amax);
    FUSEKIT_CHAIN_CASE(AddSource)
    FUSEKIT_CHAIN_CASE(ColumnBias)
    FUSEKIT_CHAIN_CASE(Residual)
    FUSEKIT_CHAIN_CASE(RowScale)
    FUSEKIT_CHAIN_CASE(ColumnScale)
    FUSEKIT_CHAIN_CASE(StoreAux)
    FUSEKIT_CHAIN_CASE(QuantizeE4M3)
    FUSEKIT_CHAIN_CASE(GeluTanh)
#undef FUSEKIT_CHAIN_CASE
    // Any other op is position-independent: Scale stands for all of them (apply_op's last branch).
    default: return apply_op<EpilogueOp::Scale, T, kE, kVec>(c, node, v, at, operands, amax);
  }
}

// A gated node on a block: v = act(v) ⊙ up, act = SiLU (SwiGlu) or GELU (GeGlu).
template <class T, int kE, int kVec>
__device__ __forceinline__ void apply_gate(const ChainNode& node, float (&v)[kVec][kE], const float (&up)[kVec][kE]) {
  const bool swiglu = node.op == EpilogueOp::SwiGlu;
#pragma unroll
  for (int b = 0; b < kVec; ++b)
#pragma unroll
    for (int e = 0; e < kE; ++e) v[b][e] = (swiglu ? silu(v[b][e]) : gelu<T>(v[b][e])) * up[b][e];
}

}  // namespace fusekit::device
