#pragma once
// The eager baseline of the row ops: one simple kernel per op, as eager execution runs them
// (row statistics, then elementwise passes), each reading its inputs from memory and writing its
// output back. What the fused kernels are measured against; not tuned.
#include <cstdint>
#include <type_traits>

#include "fusekit/device/convert.cuh"
#include "fusekit/device/row/row_reduce.cuh"
#include "fusekit/reference/softmax.hpp"

namespace fusekit::device {

inline constexpr int kEagerThreads = 256;

// A [rows, n] operand of an eager pass (row stride in elements); data == nullptr: absent.
template <class T>
struct EagerMatrix {
  T* data = nullptr;
  std::int64_t ld = 0;
  __device__ float at(std::int64_t i, std::int64_t j) const { return Float<std::remove_const_t<T>>::load(data[i * ld + j]); }
};

struct EagerRowStats {
  const float* first = nullptr;  // per row
  const float* second = nullptr;
};

// y[i,j] = op(a[i,j], b[i,j], stats of row i, column j), every element, grid-stride.
template <class T, class Op>
__global__ void eager_map_kernel(EagerMatrix<const T> a, EagerMatrix<const T> b, EagerRowStats stats,
                                 const T* col_first, const T* col_second, EagerMatrix<T> y, std::int64_t rows,
                                 std::int64_t n, Op op) {
  const std::int64_t total = rows * n;
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < total;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = k / n, j = k - i * n;
    const float av = a.at(i, j);
    const float bv = b.data ? b.at(i, j) : 0.0f;
    const float s0 = stats.first ? stats.first[i] : 0.0f;
    const float s1 = stats.second ? stats.second[i] : 0.0f;
    const float c0 = col_first ? Float<T>::load(col_first[j]) : 1.0f;
    const float c1 = col_second ? Float<T>::load(col_second[j]) : 0.0f;
    y.data[i * y.ld + j] = Float<T>::store(op(av, bv, s0, s1, c0, c1));
  }
}

// (first[i], second[i]) = finish(⊕_j fold(x[i,j], stats of row i)), one CTA per row.
struct MaxPairOp {
  __device__ SumPair operator()(const SumPair& a, const SumPair& b) const {
    return {fmaxf(a.first, b.first), fmaxf(a.second, b.second)};
  }
};

template <class T, class Fold, class Combine, class Finish>
__global__ void __launch_bounds__(kEagerThreads) eager_row_reduce_kernel(EagerMatrix<const T> x, EagerRowStats in,
                                                                          float* first, float* second, std::int64_t n,
                                                                          Fold fold, Finish finish) {
  // The whole CTA holds the row: one row per CTA, no cluster.
  constexpr RowLayout kLayout{kEagerThreads, 1, 1, 0};
  const std::int64_t i = blockIdx.x;
  const float s = in.first ? in.first[i] : 0.0f;
  SumPair acc = fold.identity();
  for (std::int64_t j = threadIdx.x; j < n; j += kEagerThreads) acc = fold(acc, x.at(i, j), s);
  acc = row_allreduce<0>(acc, Combine{}, kLayout);
  if (threadIdx.x == 0) {
    const SumPair out = finish(acc, static_cast<float>(n));
    first[i] = out.first;
    if (second) second[i] = out.second;
  }
}

// s[i,j] = scale·x[i,j], or −∞ where the bottom-right causal mask hides (i, j) or x is −∞.
template <class T>
__global__ void eager_causal_scale_kernel(EagerMatrix<const T> x, EagerMatrix<T> s, std::int64_t rows, std::int64_t n,
                                          float scale, reference::Causal causal) {
  const std::int64_t total = rows * n;
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < total;
       k += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = k / n, j = k - i * n;
    const float v = x.at(i, j);
    const bool hidden = (causal == reference::Causal::Yes && j > i + (n - rows)) || v == -INFINITY;
    s.data[i * s.ld + j] = Float<T>::store(hidden ? -INFINITY : scale * v);
  }
}

}  // namespace fusekit::device
