#pragma once
// The pointwise chain kernel: any EpilogueSpec applied to every element of a row-major matrix in
// one pass,
//   y[i, j] = chain(x[i, ·])[j]      (the chain's nodes in order; a gated node pairs two columns)
// one 16-byte chunk of x per thread (or one element on the element-by-element path), with every
// tensor a node reads loaded as a chunk of the same columns. The Level-4 compiler emits calls to
// it for the elementwise tails it cannot put into a GEMM.
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "fusekit/device/epilogue/chain.cuh"
#include "fusekit/device/row/row_tile.cuh"

namespace fusekit::device {

inline constexpr int kChainThreads = 256;

struct PointwiseChainParams {
  const void* x = nullptr;
  std::int64_t ld_x = 0;
  void* y = nullptr;
  std::int64_t ld_y = 0;
  std::uint32_t rows = 0;
  std::uint32_t chunks_per_row = 0;  // output columns / elements per chunk
  Chain chain;
  const float* quant_scale = nullptr;  // QuantizeE4M3
  float* amax = nullptr;               // QuantizeE4M3, optional
};

template <class T, int kE>
__device__ inline void load_values(const T* at, float (&v)[kE], Cache cache) {
  Pack<T, kE> pack;
  const auto* word = reinterpret_cast<const typename Pack<T, kE>::Word*>(at);
  pack.word = cache == Cache::Keep ? __ldg(word) : __ldcs(word);
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = Element<T>::load(pack.e[e]);
}

template <class T, int kE>
__device__ inline void store_values(T* at, const float (&v)[kE]) {
  Pack<T, kE> pack;
#pragma unroll
  for (int e = 0; e < kE; ++e) pack.e[e] = Element<T>::store(v[e]);
  __stcs(reinterpret_cast<typename Pack<T, kE>::Word*>(at), pack.word);
}

// GELU (tanh form) for results of type T: the hardware tanh when T is a 16-bit type.
template <class T>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (sizeof(T) == 2) return gelu_tanh_fast(x);
  else return gelu_tanh(x);
}

// One node on the kE values of row i at columns [col, col + kE).
template <class T, int kE>
__device__ inline void apply_node(const Chain& c, const ChainNode& node, float (&v)[kE], std::int64_t i, int col,
                                  const PointwiseChainParams& p, float& amax) {
  float t[kE];
  switch (node.op) {
    case EpilogueOp::AddSource:
      load_values<T, kE>(static_cast<const T*>(c.source) + i * c.ld_source + col, t, Cache::Stream);
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] += node.p0 * t[e];
      break;
    case EpilogueOp::ColumnBias:
      load_values<T, kE>(static_cast<const T*>(c.bias) + col, t, Cache::Keep);
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] += t[e];
      break;
    case EpilogueOp::Residual:
      load_values<T, kE>(static_cast<const T*>(c.residual) + i * c.ld_residual + col, t, Cache::Stream);
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] += t[e];
      break;
    case EpilogueOp::RowScale: {
      const float s = c.row_scale[i];
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] *= s;
      break;
    }
    case EpilogueOp::ColumnScale:
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] *= __ldg(c.col_scale + col + e);
      break;
    case EpilogueOp::StoreAux: store_values<T, kE>(static_cast<T*>(c.aux) + i * c.ld_aux + col, v); break;
    case EpilogueOp::QuantizeE4M3: {
      const float scale = *p.quant_scale;
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        amax = fmaxf(amax, fabsf(v[e]));
        v[e] *= scale;  // rounded to e4m3 by the store
      }
      break;
    }
    case EpilogueOp::GeluTanh:
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] = gelu<T>(v[e]);
      break;
    default:
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] = apply_uniform(node, v[e]);
      break;
  }
}

// NOTE: non-negative floats order like their bit patterns, so an integer atomicMax is a float max.
__device__ inline void chain_amax(float* address, float value) {
#pragma unroll
  for (int mask = kWarpThreads / 2; mask > 0; mask /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xFFFFFFFFu, value, mask));
  if (threadIdx.x % kWarpThreads == 0) atomicMax(reinterpret_cast<int*>(address), __float_as_int(value));
}

// T: x's dtype (and the chain's tensors'); Out: y's (T, or e4m3 after quantize_e4m3); kE: elements
// per thread, 16 bytes of T (every row and tensor 16-byte aligned, columns and gate blocks whole
// chunks) or 1.
template <class T, class Out, int kE>
__global__ void __launch_bounds__(kChainThreads, 1) pointwise_chain_kernel(const PointwiseChainParams p) {
  const Chain& c = p.chain;
  const std::uint32_t index = blockIdx.x * kChainThreads + threadIdx.x;
  const bool live = index < p.rows * p.chunks_per_row;
  float amax = 0.0f;
  if (live) {
    const std::uint32_t i = index / p.chunks_per_row;
    const int j = static_cast<int>(index - i * p.chunks_per_row) * kE;  // first output column
    // A gated node reads the gate and up columns of output column j: blocks alternate gate, up.
    int gate_col = j, up_col = 0;
    const bool gated = c.gate < c.count;
    if (gated) {
      const int block = static_cast<int>(c.nodes[c.gate].p0);
      gate_col = j / block * 2 * block + j % block;
      up_col = gate_col + block;
    }
    const T* row = static_cast<const T*>(p.x) + std::int64_t{i} * p.ld_x;
    float v[kE], up[kE];
    load_values<T, kE>(row + gate_col, v, Cache::Stream);
    if (gated) load_values<T, kE>(row + up_col, up, Cache::Stream);
    for (int k = 0; k < c.gate; ++k) {
      apply_node<T, kE>(c, c.nodes[k], v, i, gate_col, p, amax);
      if (gated) apply_node<T, kE>(c, c.nodes[k], up, i, up_col, p, amax);
    }
    if (gated) {
      const bool swiglu = c.nodes[c.gate].op == EpilogueOp::SwiGlu;
#pragma unroll
      for (int e = 0; e < kE; ++e) v[e] = (swiglu ? silu(v[e]) : gelu<T>(v[e])) * up[e];
    }
    for (int k = c.gate + 1; k < c.count; ++k) apply_node<T, kE>(c, c.nodes[k], v, i, j, p, amax);
    store_values<Out, kE>(static_cast<Out*>(p.y) + std::int64_t{i} * p.ld_y + j, v);
  }
  if constexpr (!std::is_same_v<Out, T>) {
    if (p.amax != nullptr) chain_amax(p.amax, amax);
  }
}

}  // namespace fusekit::device
