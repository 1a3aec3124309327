#pragma once
// LayerNorm → e4m3 with a scale per row, rows split over a cluster of slices (sm_90), each row's
// two cluster all-reduces overlapped with its neighbours' work:
//   q = saturate(y·448/amax(y row)),  y = (h − mean)·rstd·w + b
//
// norm_quantize_persistent_kernel waits on every all-reduce where it is made: a split row's Σh and
// Σh², then its max |y|, each a round trip through distributed shared memory. Here a CTA pushes a
// row's sums and goes on to store the row before (its y kept in registers since its own amax was
// pushed), and pushes a row's max |y| and goes on to the next row's sums, so each round trip runs
// under the other half of the CTA's work. The row's packed chunks are unpacked twice (sums, then
// y) so that only the previous row's y, not this row's floats beside it, is held across the wait.
// NOTE: measured on an H100 (session 62, bf16, 2^27 elements, GB/s, against
// norm_quantize_persistent_kernel): 2939 → 2976, 2919 → 2945, 2916 → 2928, 2906 → 2932 at 65536 /
// 57344 / 49152 / 40960 columns; at 92 SMs (an H200's bytes per SM) 2879 → 2915, 2846 → 2888,
// 2821 → 2865 at 65536 / 49152 / 40960, 57344 unchanged (2586 → 2588).
#include <cstdint>

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include "fusekit/device/norm/norm_quantize.cuh"

namespace fusekit::device {

// Persistent clusters of kSplitCtas CTAs of one four-warp group each, a row a cluster at a time,
// CTA r holding columns [r·slice, (r + 1)·slice) of each row (its weight and bias as bf16 in
// shared memory, its copy of the row by one bulk copy into one row buffer, issued a row ahead).
// Iteration k: (A) row k's Σh and Σh² pushed to the cluster; (B) row k − 1's max |y| waited for,
// its scale stored and its y quantized and stored; (C) row k's sums waited for, its y computed
// into the registers row k − 1's held and its max |y| pushed.
// NOTE: every slot is reused two rows on, after the CTA has waited on a push that each peer made
// past reading the slot's last use: row k's sums (A) after row k − 2's max |y| (B of k − 1), row
// k's max |y| (C) after row k's sums, which each peer pushed past B of k − 1.
template <class T, int kSplitCtas>
__global__ void __maxnreg__(kNativeEightRegisters) norm_quantize_overlapped_kernel(const NormForwardParams p) {
  static_assert(sizeof(T) == 2, "bf16 rows");
  static_assert(kSplitCtas > 1 && kSplitCtas <= kMaxSplitCtas, "a portable cluster");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Config = QuantizingRows8;
  using Tile = RowTile<T, Config>;
  constexpr int kE = Tile::kElements;
  constexpr int kChunks = Tile::kChunks;
  constexpr Bf16Widen kWiden = Bf16Widen::Multiply;
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  using Row = std::uint32_t;  // the host keeps rows below kPersistentEightMaxRows
  using Affine = SharedAffine<T, BiasPlanes::Packed, AffineFormat::Native, true>;
  if (threadIdx.x == 0) cta_amax_bits() = 0;

  const auto threads = static_cast<int>(blockDim.x);  // one row group
  const auto t = static_cast<int>(threadIdx.x);
  const auto rank = static_cast<int>(cute::block_rank_in_cluster());
  const int columns = p.layout.slice;
  const int begin = rank * columns;
  const RowSlot slot{begin, t, threads};
  const RowSlot staged_slot{0, t, threads};
  const RowGroup row_group{kFirstGroupBarrier, 0};
  const bool leader = rank == 0 && t == 0;
  const PersistentQuantizeSmem<T> layout(columns, p.weight, p.bias, 1, AffineFormat::Native, RowBuffers::One);
  extern __shared__ __align__(128) float4 smem[];
  auto* const base = reinterpret_cast<char*>(smem);
  T* const buffer = reinterpret_cast<T*>(base + layout.buffers_offset());
  auto* const landed = reinterpret_cast<std::uint64_t*>(base + layout.barriers_offset());
  const bool copier = t == 0;
  const auto bytes = static_cast<std::uint32_t>(layout.row_bytes);
  const auto copy_row = [&](Row row) {
    Barrier::arrive_and_expect_tx(landed, bytes);
    cute::SM90_BULK_COPY_G2S::copy(p.x.row<const T>(row, p.rows_per_batch) + begin, landed, buffer,
                                   static_cast<std::int32_t>(bytes));
  };
  const auto rows = static_cast<Row>(p.rows);
  const Row first = Row{blockIdx.x} / kSplitCtas;
  const Row step = Row{gridDim.x} / kSplitCtas;
  // The first row's copy runs under the staging of the weight and bias.
  if (copier) {
    Barrier::init(landed, 1);
    cutlass::arch::fence_barrier_init();
    if (first < rows) copy_row(first);
  }
  const Affine affine(smem, p, begin, columns);
  __syncthreads();  // the affine, the barrier, the CTA's running amax
  QuantizeExchange& exchange = quantize_exchange();
  exchange.start();
  std::uint32_t phases = 0;  // of the exchange's slots

  const auto group_sum = [&](auto site, auto v, auto op, int parity) {
    return group_allreduce<decltype(site)::value, WarpCombine::Butterfly>(v, op, p.layout, row_group,
                                                                          kQuantizeSites * parity);
  };
  constexpr std::integral_constant<int, 0> kSums;
  constexpr std::integral_constant<int, 1> kCentred;
  constexpr std::integral_constant<int, 3> kAmax;
  const auto exchange_slot = [](int site, int parity) { return site + kQuantizeSites * parity; };
  // Σ(h − centre) and Σ(h − centre)² over the thread's chunks, in two chains each.
  const auto centred_sums = [&](const Tile& h, float centre) {
    SumPair chains[2] = {};
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      float x[kE];
      unpack_floats<T, kE, kWiden>(h.get(i), x);
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        SumPair& chain = chains[e % 2];
        chain.first += x[e] - centre;
        chain.second += (x[e] - centre) * (x[e] - centre);
      }
    }
    return SumPairOp{}(chains[0], chains[1]);
  };

  float y[kChunks][kE];  // row k − 1's y, from C of iteration k − 1 to B of iteration k
  Row previous = 0;
  int k = 0;
  for (Row row = first;; row += step, ++k) {
    const int parity = k & 1;
    const bool live = row < rows;  // alike in every CTA of the cluster
    Tile h(slot);
    // (A) Row k's sums, pushed; the buffer, read by every thread before the group's barrier,
    // takes the next row's copy.
    if (live) {
      Barrier::wait(landed, k & 1);
      h.template load_staged<Access::Whole>(buffer, staged_slot, columns);
      const SumPair sums = group_sum(kSums, centred_sums(h, 0.0f), SumPairOp{}, parity);
      if (copier && row + step < rows) copy_row(row + step);
      exchange.push(exchange_slot(kSums, parity), sums, rank, kSplitCtas);
    }
    // (B) Row k − 1's stores.
    if (k > 0) {
      const float amax = exchange.template wait<float>(exchange_slot(kAmax, parity ^ 1), AmaxOp{}, kSplitCtas, phases);
      if (leader && p.amax != nullptr) cta_filtered_atomic_amax(p.amax, amax);
      const float factor = quantize_scale(p, amax, leader, previous);
      auto* walk = p.y.row<__nv_fp8_e4m3>(previous, p.rows_per_batch) + Tile::column(slot, 0);
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
#pragma unroll
        for (int e = 0; e < kE; ++e) y[i][e] *= factor;
        store_pack<__nv_fp8_e4m3, kE, Access::Whole>(walk + i * threads * kE, 0, p.n,
                                                    pack_floats<__nv_fp8_e4m3, kE>(y[i]));
      }
    }
    if (!live) break;
    // (C) Row k's y and max |y|.
    const SumPair sums = exchange.template wait<SumPair>(exchange_slot(kSums, parity), SumPairOp{}, kSplitCtas, phases);
    float mean = sums.first * p.inv_n;
    float variance = sums.second * p.inv_n - mean * mean;
    // The cluster's CTAs hold the same totals, so they take the centred sums alike
    // (layer_norm_moments' reason).
    if (mean * mean > kTrustedShift * variance) {
      const SumPair dev = exchange.allreduce(exchange_slot(kCentred, parity),
                                             group_sum(kCentred, centred_sums(h, mean), SumPairOp{}, parity),
                                             SumPairOp{}, rank, kSplitCtas, phases);
      const float shift = dev.first * p.inv_n;
      mean += shift;
      variance = dev.second * p.inv_n - shift * shift;
    }
    const float rstd = rsqrtf(fmaxf(variance, 0.0f) + p.eps);
    if (leader) {
      if (p.mean) p.mean[row] = mean;
      if (p.rstd) p.rstd[row] = rstd;
    }
#pragma unroll
    for (int i = 0; i < kChunks; ++i) unpack_floats<T, kE, kWiden>(h.get(i), y[i]);
    const float shift = folded_shift(y, mean, rstd);
    float partial_amax[2] = {};
    const auto affine_all = [&](auto terms) {
      using Terms = decltype(terms);
      // Chunk i's weight and bias loads wait on chunk i − 2's y (norm_quantize_row's reason).
      float chain = 0.0f, chain_before = 0.0f;
      int at = Affine::first_offset(slot);
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        if (i > 0) at += Affine::step(slot);
        if (i >= 2) asm volatile("" : "+r"(at) : "f"(chain_before));
        float w[kE], b[kE];
        affine.template get_at<Terms, kWiden>(at, 0, w, b);
        affine_floats_in_place<Terms, AffineForm::Folded>(y[i], w, b, shift, rstd);
        chain_before = chain;
        chain = y[i][kE - 1];
#pragma unroll
        for (int e = 0; e < kE; ++e) partial_amax[e % 2] = amax_step(partial_amax[e % 2], y[i][e]);
      }
    };
    with_folded_terms(p, affine_all);
    const float amax = group_sum(kAmax, amax_join(partial_amax[0], partial_amax[1]), AmaxOp{}, parity);
    exchange.push(exchange_slot(kAmax, parity), amax, rank, kSplitCtas);
    previous = row;
  }
#endif
}

}  // namespace fusekit::device
