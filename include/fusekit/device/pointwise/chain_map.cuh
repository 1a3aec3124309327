#pragma once
// The pointwise chain kernel: any EpilogueSpec applied to every element of a row-major matrix in
// one pass,
//   y[i, j] = chain(x[i, ·])[j]      (the chain's nodes in order; a gated node pairs two columns)
// in 16-byte chunks of x (persistent CTAs, each thread's chunks of a tile staged in shared memory
// a tile ahead) or one element per thread (the element-by-element path), with every tensor a node
// reads taken as a chunk of the same columns. The Level-4 compiler emits calls to it for the
// elementwise tails it cannot put into a GEMM.
#include <cuda_fp8.h>
#include <cutlass/fast_math.h>

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "fusekit/device/amax.cuh"
#include "fusekit/device/epilogue/chain_block.cuh"

namespace fusekit::device {

inline constexpr int kChainThreads = 256;
// Vector path: persistent CTAs; a tile is kChainChunks 16-byte chunks per thread, staged in shared
// memory by cp.async while the previous tile is computed (two buffers), and CTAs per SM at the
// register cap (80 registers; 64 spilled). NOTE: loaded into registers one chunk per thread, the
// loads of a chunk waited one after another (a load in a node's branch issues once the previous
// node has its value: bias→GELU→residual ran at 2.83 TB/s), and preloading every tensor of the
// chunk into registers took 92 registers (two CTAs per SM). Staged, a thread keeps kChainChunks ×
// (x and each row-indexed tensor) × 16 bytes in flight without holding registers: 96 KB per SM
// for x and a residual. Staged but not double-buffered (a CTA's load and compute phases one after
// the other, three CTAs per SM): 3.28 TB/s.
inline constexpr int kChainChunks = 4;
inline constexpr int kChainMinCtas = 3;
inline constexpr int kChainTileChunks = kChainThreads * kChainChunks;  // output chunks per tile
inline constexpr int kChainBuffers = 2;

// The planes of shared memory the vector path stages, each kChainTileChunks chunks: x's gate (or
// only) columns always, then x's up columns, the source and the residual where the nodes after
// the gate read them (-1: not staged). The host sets them (pointwise_chain.cu).
struct ChainStaging {
  int up = -1, source = -1, residual = -1;
  int planes = 1;
};

struct PointwiseChainParams {
  const void* x = nullptr;
  std::int64_t ld_x = 0;
  void* y = nullptr;
  std::int64_t ld_y = 0;
  std::uint32_t rows = 0;
  std::uint32_t chunks_per_row = 0;  // output columns / elements per chunk
  // Vector path: chunk index → (row, chunk in row) by a multiply and shift. NOTE: a 32-bit
  // division was ~20 instructions per chunk; the vector path's chunk indices are below 2^30
  // (fewer than 2^32 elements, at least 4 per chunk), inside FastDivmod's signed range.
  cutlass::FastDivmod row_of_chunk;
  Chain chain;
  ChainStaging staging;                // vector path
};

// How a kernel runs its chain: read and dispatched node by node at run time (InterpretedChain), or
// compiled in for one fixed sequence of ops (CompiledChain; their parameters are still read from
// the Chain). NOTE: interpreted, bias→GELU→residual executed 29.6 instructions per element, 95 M of
// its 124 M not FP32 (ncu, session 4): the node loop, the dispatch, the block bookkeeping.
struct InterpretedChain {};
template <EpilogueOp... kOps>
struct CompiledChain {
  static constexpr int kCount = sizeof...(kOps);
  static constexpr EpilogueOp kOpsOf[kCount] = {kOps...};
};
template <class Program>
inline constexpr bool kCompiledChain = !std::is_same_v<Program, InterpretedChain>;

// The chains compiled in (ungated, output in x's dtype): a transformer MLP's tail with and without
// its residual, and a projection's bias with its residual.
using CompiledChains =
    std::tuple<CompiledChain<EpilogueOp::ColumnBias, EpilogueOp::GeluTanh, EpilogueOp::Residual>,
               CompiledChain<EpilogueOp::ColumnBias, EpilogueOp::GeluTanh>,
               CompiledChain<EpilogueOp::ColumnBias, EpilogueOp::Residual>>;

// The ops of a compiled chain, node k = kOps[k], in order.
template <class T, int kE, int kVec, class Operands, EpilogueOp... kOps>
__device__ __forceinline__ void apply_compiled(CompiledChain<kOps...>, const PointwiseChainParams& p,
                                               float (&v)[kVec][kE], const BlockColumns<kVec>& at,
                                               const Operands& operands, float& amax) {
  int k = 0;
  (apply_op<kOps, T, kE, kVec>(p.chain, p.chain.nodes[k++], v, at, operands, amax), ...);
}

// Where output chunk `index` (row-major over rows × chunks_per_row) reads x: a gated node pairs
// output column j with gate column gate_col and up column up_col (blocks alternate gate, up).
struct ChunkPosition {
  std::uint32_t i;
  int j, gate_col, up_col;
  template <int kE>
  __device__ static ChunkPosition of(const PointwiseChainParams& p, std::uint32_t index) {
    ChunkPosition at;
    if constexpr (kE > 1) {
      int row = 0, chunk = 0;
      p.row_of_chunk.fast_divmod(row, chunk, static_cast<int>(index));
      at.i = static_cast<std::uint32_t>(row);
      at.j = chunk * kE;
    } else {
      at.i = index / p.chunks_per_row;
      at.j = static_cast<int>(index - at.i * p.chunks_per_row) * kE;
    }
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

// The chain on a block of kVec chunks at `at`: x's gate (or only) values in v, its up values in up
// (kGated), the tensors of the nodes after the gate read through `operands`; returns the output
// values in v.
template <class T, int kE, int kVec, bool kGated, class Program = InterpretedChain, class Operands>
__device__ inline void run_chain(const PointwiseChainParams& p, const ChunkPosition (&at)[kVec], const bool (&live)[kVec],
                                 float (&v)[kVec][kE], float (&up)[kVec][kE], const Operands& operands, float& amax) {
  const Chain& c = p.chain;
  BlockColumns<kVec> out;
#pragma unroll
  for (int b = 0; b < kVec; ++b) {
    out.row[b] = at[b].i;
    out.col[b] = at[b].j;
    out.live[b] = live[b];
  }
  if constexpr (kCompiledChain<Program>) {
    static_assert(!kGated, "compiled chains are ungated");
    apply_compiled<T, kE, kVec>(Program{}, p, v, out, operands, amax);
  } else {
    if constexpr (kGated) {
      // NOTE: nodes before a gate (rare: they act on the 2N accumulator columns) read their
      // tensors from global memory as they run, for each half.
      BlockColumns<kVec> gate = out, upper = out;
#pragma unroll
      for (int b = 0; b < kVec; ++b) {
        gate.col[b] = at[b].gate_col;
        upper.col[b] = at[b].up_col;
      }
      for (int k = 0; k < c.gate; ++k) {
        apply_node<T, kE, kVec>(c, c.nodes[k], v, gate, GlobalOperands<T, kE, kVec>{c, gate}, amax);
        apply_node<T, kE, kVec>(c, c.nodes[k], up, upper, GlobalOperands<T, kE, kVec>{c, upper}, amax);
      }
      apply_gate<T>(c.nodes[c.gate], v, up);
    }
    for (int k = kGated ? c.gate + 1 : 0; k < c.count; ++k) apply_node<T, kE, kVec>(c, c.nodes[k], v, out, operands, amax);
  }
}

__device__ __forceinline__ void copy_chunk_async(uint4* to, const void* from) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(from) : "memory");
}

// The vector path's shared memory: [buffer][plane][k][thread] chunks, each thread's own.
template <class T, int kE>
struct ChainStage {
  using Chunk = Pack<T, kE>;
  uint4* base;
  int planes;
  __device__ uint4* slot(int buffer, int plane, int k) const {
    return &base[((buffer * planes + plane) * kChainChunks + k) * kChainThreads + threadIdx.x];
  }
  __device__ Chunk get(int buffer, int plane, int k) const { return *reinterpret_cast<const Chunk*>(slot(buffer, plane, k)); }
};

// The tensors of the nodes after the gate in the vector path: source and residual staged in
// shared memory, the bias read through L1 (every row reads the same).
template <class T, int kE, int kVec>
struct StagedOperands {
  const Chain& c;
  const ChainStaging& staging;
  const ChainStage<T, kE>& stage;
  int buffer, k0;
  const ChunkPosition (&at)[kVec];
  __device__ Pack<T, kE> source(int b) const { return stage.get(buffer, staging.source, k0 + b); }
  __device__ Pack<T, kE> bias(int b) const { return bias_chunk<T, kE>(c, at[b].j); }
  __device__ Pack<T, kE> residual(int b) const { return stage.get(buffer, staging.residual, k0 + b); }
};

// Chunks k0 … k0 + kVec − 1 of the thread's staged tile `tile`: the chain, then the stores.
template <class T, class Out, int kE, int kVec, bool kGated, class Program>
__device__ inline void chain_block(const PointwiseChainParams& p, const ChainStage<T, kE>& stage, std::uint64_t tile,
                                   int buffer, int k0, std::uint64_t total, float& amax) {
  ChunkPosition at[kVec];
  bool live[kVec];
  float v[kVec][kE], up[kVec][kE];  // up: unused (and dropped) unless kGated
#pragma unroll
  for (int b = 0; b < kVec; ++b) {
    const std::uint64_t index = tile * kChainTileChunks + static_cast<std::uint64_t>(k0 + b) * kChainThreads + threadIdx.x;
    live[b] = index < total;
    at[b] = ChunkPosition::of<kE>(p, static_cast<std::uint32_t>(live[b] ? index : total - 1));
    unpack_floats<T, kE>(stage.get(buffer, 0, k0 + b), v[b]);
    if constexpr (kGated) unpack_floats<T, kE>(stage.get(buffer, p.staging.up, k0 + b), up[b]);
  }
  run_chain<T, kE, kVec, kGated, Program>(p, at, live, v, up,
                                          StagedOperands<T, kE, kVec>{p.chain, p.staging, stage, buffer, k0, at}, amax);
#pragma unroll
  for (int b = 0; b < kVec; ++b)
    if (live[b]) store_values<Out, kE>(static_cast<Out*>(p.y) + std::int64_t{at[b].i} * p.ld_y + at[b].j, v[b]);
}

// Chunks interpreted together (a node dispatched once per block): ungated chains, and gated ones
// (x's gate and up halves both in registers).
inline constexpr int kBlockChunks = 2;
inline constexpr int kGatedBlockChunks = 1;

// T: x's dtype (and the chain's tensors'); Out: y's (T, or e4m3 after quantize_e4m3); kE: elements
// per chunk, 16 bytes of T (every row and tensor 16-byte aligned, columns and gate blocks whole
// chunks: kChainChunks chunks per thread, staged in p.staging.planes planes of dynamic shared
// memory, two buffers of them) or 1 (one element per thread, read directly).
// Program: InterpretedChain, or one of CompiledChains (vector path, ungated, Out = T).
template <class T, class Out, int kE, class Program = InterpretedChain>
__global__ void __launch_bounds__(kChainThreads, kChainMinCtas) pointwise_chain_kernel(const PointwiseChainParams p) {
  static_assert(!kCompiledChain<Program> || (kE > 1 && std::is_same_v<Out, T>), "compiled: vector path, Out = T");
  const Chain& c = p.chain;
  const bool gated = !kCompiledChain<Program> && c.gate < c.count;
  const std::uint64_t total = std::uint64_t{p.rows} * p.chunks_per_row;
  float amax = 0.0f;
  if constexpr (kE == 1) {
    const std::uint64_t index = std::uint64_t{blockIdx.x} * kChainThreads + threadIdx.x;
    const bool live[1] = {index < total};
    const ChunkPosition at[1] = {ChunkPosition::of<kE>(p, static_cast<std::uint32_t>(live[0] ? index : total - 1))};
    const T* row = static_cast<const T*>(p.x) + std::int64_t{at[0].i} * p.ld_x;
    float v[1][kE], up[1][kE];
    load_values<T, kE>(row + at[0].gate_col, v[0], Cache::Stream);
    BlockColumns<1> out{{at[0].i}, {at[0].j}, {live[0]}};
    const GlobalOperands<T, kE, 1> operands{c, out};
    if (gated) {
      load_values<T, kE>(row + at[0].up_col, up[0], Cache::Stream);
      run_chain<T, kE, 1, true>(p, at, live, v, up, operands, amax);
    } else {
      run_chain<T, kE, 1, false>(p, at, live, v, up, operands, amax);
    }
    if (live[0]) store_values<Out, kE>(static_cast<Out*>(p.y) + std::int64_t{at[0].i} * p.ld_y + at[0].j, v[0]);
  } else {
    extern __shared__ uint4 staged[];
    const ChainStaging& s = p.staging;
    const ChainStage<T, kE> stage{staged, s.planes};
    const std::uint64_t tiles = (total + kChainTileChunks - 1) / kChainTileChunks;
    // Starts the copies of every stream of the thread's chunks of `tile` (a dead chunk copies the
    // last live one); each thread reads back only its own slots, so no CTA barrier is needed.
    const auto stage_tile = [&](std::uint64_t tile, int buffer) {
      if (tile < tiles) {
#pragma unroll
        for (int k = 0; k < kChainChunks; ++k) {
          const std::uint64_t index = tile * kChainTileChunks + static_cast<std::uint64_t>(k) * kChainThreads + threadIdx.x;
          const auto at = ChunkPosition::of<kE>(p, static_cast<std::uint32_t>(index < total ? index : total - 1));
          const T* row = static_cast<const T*>(p.x) + std::int64_t{at.i} * p.ld_x;
          copy_chunk_async(stage.slot(buffer, 0, k), row + at.gate_col);
          if (s.up >= 0) copy_chunk_async(stage.slot(buffer, s.up, k), row + at.up_col);
          if (s.source >= 0)
            copy_chunk_async(stage.slot(buffer, s.source, k),
                             static_cast<const T*>(c.source) + std::int64_t{at.i} * c.ld_source + at.j);
          if (s.residual >= 0)
            copy_chunk_async(stage.slot(buffer, s.residual, k),
                             static_cast<const T*>(c.residual) + std::int64_t{at.i} * c.ld_residual + at.j);
        }
      }
      asm volatile("cp.async.commit_group;\n" ::: "memory");  // empty past the last tile
    };
    // Persistent: tile blockIdx.x + r·gridDim.x in round r, the next round's tile in flight in
    // the other buffer while this one is computed.
    int buffer = 0;
    stage_tile(blockIdx.x, buffer);
    for (std::uint64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x, buffer ^= 1) {
      stage_tile(tile + gridDim.x, buffer ^ 1);
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      if constexpr (kCompiledChain<Program>) {
#pragma unroll
        for (int k0 = 0; k0 < kChainChunks; k0 += kBlockChunks)
          chain_block<T, Out, kE, kBlockChunks, false, Program>(p, stage, tile, buffer, k0, total, amax);
      } else if (gated) {
#pragma unroll 1
        for (int k0 = 0; k0 < kChainChunks; k0 += kGatedBlockChunks)
          chain_block<T, Out, kE, kGatedBlockChunks, true, Program>(p, stage, tile, buffer, k0, total, amax);
      } else {
#pragma unroll 1
        for (int k0 = 0; k0 < kChainChunks; k0 += kBlockChunks)
          chain_block<T, Out, kE, kBlockChunks, false, Program>(p, stage, tile, buffer, k0, total, amax);
      }
    }
  }
  if constexpr (!std::is_same_v<Out, T>) {
    if (c.amax != nullptr) warp_atomic_amax(c.amax, amax);
  }
}

}  // namespace fusekit::device
