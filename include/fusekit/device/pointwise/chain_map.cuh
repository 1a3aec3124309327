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
// Vector path: 16-byte chunks per thread, staged in shared memory by cp.async before any is
// computed, and CTAs per SM at the register cap (80 registers; 64 spilled). NOTE: loaded into
// registers one chunk per thread, the loads of a chunk waited one after another (a load in a
// node's branch issues once the previous node has its value: bias→GELU→residual ran at 2.83
// TB/s), and preloading every tensor of the chunk into registers took 92 registers (two CTAs per
// SM). Staged, a thread keeps kChainChunks × (x and each row-indexed tensor) × 16 bytes in flight
// without holding registers: 96 KB per SM for x and a residual.
inline constexpr int kChainChunks = 4;
inline constexpr int kChainMinCtas = 3;
inline constexpr int kChainTileChunks = kChainThreads * kChainChunks;  // output chunks per CTA

// The planes of shared memory the vector path stages, each kChainTileChunks chunks: x's gate (or
// only) columns always, then x's up columns, the source and the residual where the nodes after
// the gate read them (-1: not staged). The host sets them (pointwise_chain.cu).
struct ChainStaging {
  int up = -1, source = -1, residual = -1;
  int planes = 1;
  bool bias = false;  // a node after the gate adds the column bias (read through L1, not staged)
};

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
  ChainStaging staging;                // vector path
};

template <class T, int kE>
__device__ __forceinline__ Pack<T, kE> load_chunk(const T* at, Cache cache) {
  Pack<T, kE> pack;
  const auto* word = reinterpret_cast<const typename Pack<T, kE>::Word*>(at);
  pack.word = cache == Cache::Keep ? __ldg(word) : __ldcs(word);
  return pack;
}

template <class T, int kE>
__device__ inline void load_values(const T* at, float (&v)[kE], Cache cache) {
  const Pack<T, kE> pack = load_chunk<T, kE>(at, cache);
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

// The tensors a run of nodes reads at one chunk of columns, loaded (load) or taken from the
// shared-memory staging (vector path) before the nodes run.
template <class T, int kE>
struct NodeOperands {
  Pack<T, kE> source, bias, residual;

  __device__ void load(const Chain& c, int first, int last, std::int64_t i, int col) {
    for (int k = first; k < last; ++k) {
      switch (c.nodes[k].op) {
        case EpilogueOp::AddSource:
          source = load_chunk<T, kE>(static_cast<const T*>(c.source) + i * c.ld_source + col, Cache::Stream);
          break;
        case EpilogueOp::ColumnBias: bias = load_chunk<T, kE>(static_cast<const T*>(c.bias) + col, Cache::Keep); break;
        case EpilogueOp::Residual:
          residual = load_chunk<T, kE>(static_cast<const T*>(c.residual) + i * c.ld_residual + col, Cache::Stream);
          break;
        default: break;
      }
    }
  }
};

// v += scale · pack, element by element in float.
template <class T, int kE>
__device__ __forceinline__ void add_pack(float (&v)[kE], const Pack<T, kE>& pack, float scale = 1.0f) {
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = fmaf(scale, Element<T>::load(pack.e[e]), v[e]);
}

// One node on the kE values of row i at columns [col, col + kE); the tensors it reads are in `ops`.
template <class T, int kE>
__device__ inline void apply_node(const Chain& c, const ChainNode& node, float (&v)[kE], std::int64_t i, int col,
                                  const NodeOperands<T, kE>& ops, const PointwiseChainParams& p, float& amax) {
  switch (node.op) {
    case EpilogueOp::AddSource: add_pack(v, ops.source, node.p0); break;
    case EpilogueOp::ColumnBias: add_pack(v, ops.bias); break;
    case EpilogueOp::Residual: add_pack(v, ops.residual); break;
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

// Where output chunk `index` (row-major over rows × chunks_per_row) reads x: a gated node pairs
// output column j with gate column gate_col and up column up_col (blocks alternate gate, up).
struct ChunkPosition {
  std::uint32_t i;
  int j, gate_col, up_col;
  template <int kE>
  __device__ static ChunkPosition of(const PointwiseChainParams& p, std::uint32_t index) {
    ChunkPosition at;
    at.i = index / p.chunks_per_row;
    at.j = static_cast<int>(index - at.i * p.chunks_per_row) * kE;
    at.gate_col = at.j;
    at.up_col = 0;
    const Chain& c = p.chain;
    if (c.gate < c.count) {
      const int block = static_cast<int>(c.nodes[c.gate].p0);
      at.gate_col = at.j / block * 2 * block + at.j % block;
      at.up_col = at.gate_col + block;
    }
    return at;
  }
};

// The chain on one chunk: x's gate (or only) values in v, its up values in up (gated chains), the
// tensors of the nodes after the gate in ops; returns the output values in v.
template <class T, int kE>
__device__ inline void run_chain(const PointwiseChainParams& p, const ChunkPosition& at, float (&v)[kE],
                                 float (&up)[kE], const NodeOperands<T, kE>& ops, float& amax) {
  const Chain& c = p.chain;
  const bool gated = c.gate < c.count;
  if (gated) {
    // NOTE: nodes before a gate (rare: they act on the 2N accumulator columns) load their tensors
    // one node at a time, for each half.
    for (int k = 0; k < c.gate; ++k) {
      NodeOperands<T, kE> node_ops;
      node_ops.load(c, k, k + 1, at.i, at.gate_col);
      apply_node<T, kE>(c, c.nodes[k], v, at.i, at.gate_col, node_ops, p, amax);
      node_ops.load(c, k, k + 1, at.i, at.up_col);
      apply_node<T, kE>(c, c.nodes[k], up, at.i, at.up_col, node_ops, p, amax);
    }
    const bool swiglu = c.nodes[c.gate].op == EpilogueOp::SwiGlu;
#pragma unroll
    for (int e = 0; e < kE; ++e) v[e] = (swiglu ? silu(v[e]) : gelu<T>(v[e])) * up[e];
  }
  for (int k = gated ? c.gate + 1 : 0; k < c.count; ++k) apply_node<T, kE>(c, c.nodes[k], v, at.i, at.j, ops, p, amax);
}

template <class T, int kE>
__device__ __forceinline__ void unpack(const Pack<T, kE>& pack, float (&v)[kE]) {
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = Element<T>::load(pack.e[e]);
}

__device__ __forceinline__ void copy_chunk_async(uint4* to, const void* from) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(from) : "memory");
}

// T: x's dtype (and the chain's tensors'); Out: y's (T, or e4m3 after quantize_e4m3); kE: elements
// per chunk, 16 bytes of T (every row and tensor 16-byte aligned, columns and gate blocks whole
// chunks: kChainChunks chunks per thread, staged in p.staging.planes planes of dynamic shared
// memory) or 1 (one element per thread, read directly).
template <class T, class Out, int kE>
__global__ void __launch_bounds__(kChainThreads, kChainMinCtas) pointwise_chain_kernel(const PointwiseChainParams p) {
  const Chain& c = p.chain;
  const std::uint64_t total = std::uint64_t{p.rows} * p.chunks_per_row;
  float amax = 0.0f;
  float v[kE], up[kE];
  if constexpr (kE == 1) {
    const std::uint64_t index = std::uint64_t{blockIdx.x} * kChainThreads + threadIdx.x;
    if (index < total) {
      const auto at = ChunkPosition::of<kE>(p, static_cast<std::uint32_t>(index));
      const T* row = static_cast<const T*>(p.x) + std::int64_t{at.i} * p.ld_x;
      NodeOperands<T, kE> ops;
      ops.load(c, c.gate < c.count ? c.gate + 1 : 0, c.count, at.i, at.j);
      load_values<T, kE>(row + at.gate_col, v, Cache::Stream);
      if (c.gate < c.count) load_values<T, kE>(row + at.up_col, up, Cache::Stream);
      run_chain<T, kE>(p, at, v, up, ops, amax);
      store_values<Out, kE>(static_cast<Out*>(p.y) + std::int64_t{at.i} * p.ld_y + at.j, v);
    }
  } else {
    using Chunk = Pack<T, kE>;
    extern __shared__ uint4 staged[];  // [plane][k][thread]
    const ChainStaging& s = p.staging;
    const auto slot = [&](int plane, int k) { return &staged[(plane * kChainChunks + k) * kChainThreads + threadIdx.x]; };
    const auto chunk_index = [&](int k) {
      return (std::uint64_t{blockIdx.x} * kChainChunks + k) * kChainThreads + threadIdx.x;
    };
    // Every stream of every chunk in flight at once; each thread reads back only its own slots.
#pragma unroll
    for (int k = 0; k < kChainChunks; ++k) {
      const std::uint64_t index = chunk_index(k);
      if (index >= total) continue;
      const auto at = ChunkPosition::of<kE>(p, static_cast<std::uint32_t>(index));
      const T* row = static_cast<const T*>(p.x) + std::int64_t{at.i} * p.ld_x;
      copy_chunk_async(slot(0, k), row + at.gate_col);
      if (s.up >= 0) copy_chunk_async(slot(s.up, k), row + at.up_col);
      if (s.source >= 0)
        copy_chunk_async(slot(s.source, k), static_cast<const T*>(c.source) + std::int64_t{at.i} * c.ld_source + at.j);
      if (s.residual >= 0)
        copy_chunk_async(slot(s.residual, k),
                         static_cast<const T*>(c.residual) + std::int64_t{at.i} * c.ld_residual + at.j);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#pragma unroll 1
    for (int k = 0; k < kChainChunks; ++k) {
      const std::uint64_t index = chunk_index(k);
      if (index >= total) break;
      const auto at = ChunkPosition::of<kE>(p, static_cast<std::uint32_t>(index));
      NodeOperands<T, kE> ops;
      if (s.source >= 0) ops.source = *reinterpret_cast<const Chunk*>(slot(s.source, k));
      if (s.residual >= 0) ops.residual = *reinterpret_cast<const Chunk*>(slot(s.residual, k));
      if (s.bias) ops.bias = load_chunk<T, kE>(static_cast<const T*>(c.bias) + at.j, Cache::Keep);
      unpack<T, kE>(*reinterpret_cast<const Chunk*>(slot(0, k)), v);
      if (s.up >= 0) unpack<T, kE>(*reinterpret_cast<const Chunk*>(slot(s.up, k)), up);
      run_chain<T, kE>(p, at, v, up, ops, amax);
      store_values<Out, kE>(static_cast<Out*>(p.y) + std::int64_t{at.i} * p.ld_y + at.j, v);
    }
  }
  if constexpr (!std::is_same_v<Out, T>) {
    if (p.amax != nullptr) chain_amax(p.amax, amax);
  }
}

}  // namespace fusekit::device
