// Launchers of the eager row ops (fusekit/eager_rows.hpp): the norm and softmax baselines,
// one simple kernel per op.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "../row/row_launch.cuh"
#include "fusekit/device/row/eager.cuh"
#include "fusekit/eager_rows.hpp"

namespace fusekit::eager {

namespace {

using device::EagerMatrix;
using device::EagerRowStats;
using device::SumPair;

constexpr int kBlocksPerSm = 8;  // enough resident warps to keep every SM's loads in flight

// The checks that need no device come first, so that they can be tested without one; then
// check_on_device() asks the driver about every pointer.
void check_matrix(std::string_view arg, const TensorView& t, const TensorView& like) {
  check::structure(arg, t);
  check::rank(arg, t, 2);
  check::dtype(arg, t, {DType::F32, DType::F16, DType::BF16});
  check::same_shape(arg, t, "x", like);
  require(t.dtype == like.dtype, rows::join(arg, " dtype"), dtype_name(like.dtype), dtype_name(t.dtype));
}

enum class Stat : std::uint8_t { Optional, Required };

void check_stats(std::string_view arg, const TensorView& t, const TensorView& like, Stat need) {
  require(need == Stat::Optional || !t.empty() || like.shape[0] == 0, arg, "f32 [rows] (this op reads or writes it)",
          "empty");
  rows::check_row_stats(arg, t, like.shape[0]);
}

// The reduce kernel runs a CTA per row: a grid's x extent.
// A map's output: written element by element after its thread read the input's element, so in
// place through the input's identical view only, and apart from every other argument.
void check_map_output(std::string_view arg, const TensorView& out, std::string_view in_arg, const TensorView& in,
                      std::initializer_list<check::NamedView> others) {
  check::disjoint(arg, out, in_arg, in, check::InPlace::Allowed);
  check::disjoint_from_each(arg, out, others);
}

void check_grid_rows(std::string_view arg, const TensorView& t) {
  require(t.shape[0] <= INT32_MAX, rows::join(arg, " rows"), "at most 2^31 - 1 (one CTA per row)", t.shape[0]);
}

template <class T>
EagerMatrix<const T> in(const TensorView& t) {
  return {static_cast<const T*>(t.data), t.empty() ? 0 : t.strides[0]};
}
template <class T>
EagerMatrix<T> out(const TensorView& t) {
  return {static_cast<T*>(t.data), t.strides[0]};
}
const float* stat(const TensorView& t) { return static_cast<const float*>(t.data); }

int grid_for(std::int64_t work) { return grid_stride_ctas(work, device::kEagerThreads, kBlocksPerSm); }

// Runs f(T{}) with T the element type of `dtype`.
template <class F>
void by_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: return f(float{});
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
    default: throw_invalid("x dtype", "f32, f16 or bf16", dtype_name(dtype));
  }
}

template <class Op>
void map(const TensorView& a, const TensorView& b, const TensorView& s0, const TensorView& s1, const TensorView& c0,
         const TensorView& c1, const TensorView& y, cudaStream_t stream, Op op) {
  const std::int64_t rows = a.shape[0], n = a.shape[1];
  if (rows == 0 || n == 0) return;
  by_dtype(a.dtype, [&](auto zero) {
    using T = decltype(zero);
    device::eager_map_kernel<T, Op><<<grid_for(rows * n), device::kEagerThreads, 0, stream>>>(
        in<T>(a), in<T>(b), EagerRowStats{stat(s0), stat(s1)}, static_cast<const T*>(c0.data),
        static_cast<const T*>(c1.data), out<T>(y), rows, n, op);
    check_launch("eager_map_kernel");
  });
}

template <class Fold, class Combine, class Finish>
void reduce(const TensorView& x, const TensorView& s, const TensorView& first, const TensorView& second,
            cudaStream_t stream, Fold fold, Combine, Finish finish) {
  const std::int64_t rows = x.shape[0], n = x.shape[1];
  if (rows == 0) return;
  by_dtype(x.dtype, [&](auto zero) {
    using T = decltype(zero);
    device::eager_row_reduce_kernel<T, Fold, Combine, Finish>
        <<<static_cast<unsigned>(rows), device::kEagerThreads, 0, stream>>>(
            in<T>(x), EagerRowStats{stat(s), nullptr}, static_cast<float*>(first.data),
            static_cast<float*>(second.data), n, fold, finish);
    check_launch("eager_row_reduce_kernel");
  });
}

struct SumSquares {
  __device__ SumPair identity() const { return {0.0f, 0.0f}; }
  __device__ SumPair operator()(SumPair a, float x, float) const { return {a.first + x, a.second + x * x}; }
};
// (mean, rstd) of a row from (Σx, Σx²); RMSNorm puts rstd first (it has no mean to write).
struct Moments {
  NormKind kind;
  float eps;
  __device__ SumPair operator()(SumPair s, float n) const {
    const float mean = kind == NormKind::LayerNorm ? s.first / n : 0.0f;
    const float rstd = rsqrtf(fmaxf(s.second / n - mean * mean, 0.0f) + eps);
    return kind == NormKind::LayerNorm ? SumPair{mean, rstd} : SumPair{rstd, 0.0f};
  }
};
struct Normalize {
  __device__ float operator()(float a, float, float m, float r, float, float) const { return (a - m) * r; }
};
struct Affine {
  __device__ float operator()(float a, float, float, float, float w, float b) const { return a * w + b; }
};
struct Add {
  __device__ float operator()(float a, float b, float, float, float, float) const { return a + b; }
};
struct ExpNormalize {
  __device__ float operator()(float v, float, float m, float l, float, float) const {
    return m == -INFINITY ? 0.0f : expf(v - m) / l;
  }
};
struct MaxFold {
  __device__ SumPair identity() const { return {-INFINITY, -INFINITY}; }
  __device__ SumPair operator()(SumPair a, float x, float) const { return {fmaxf(a.first, x), a.second}; }
};
struct ExpSumFold {
  __device__ SumPair identity() const { return {0.0f, 0.0f}; }
  __device__ SumPair operator()(SumPair a, float x, float max) const {
    return {a.first + (max == -INFINITY ? 0.0f : expf(x - max)), a.second};
  }
};
struct Identity {
  __device__ SumPair operator()(SumPair s, float) const { return s; }
};

}  // namespace

void row_moments(NormKind kind, const TensorView& x, const TensorView& mean, const TensorView& rstd, float eps,
                 cudaStream_t stream) {
  require(kind == NormKind::LayerNorm || kind == NormKind::RmsNorm, "kind", "LayerNorm or RmsNorm",
          static_cast<int>(kind));
  check_matrix("x", x, x);
  check_grid_rows("x", x);
  require(kind == NormKind::LayerNorm || mean.empty(), "mean", "empty for RMSNorm", mean.describe());
  check_stats("mean", mean, x, kind == NormKind::LayerNorm ? Stat::Required : Stat::Optional);
  check_stats("rstd", rstd, x, Stat::Required);
  require(std::isfinite(eps) && eps >= 0.0f, "eps", "finite and >= 0", eps);
  check::disjoint_from_each("mean", mean, {{"x", &x}, {"rstd", &rstd}});
  check::disjoint_from_each("rstd", rstd, {{"x", &x}});
  rows::check_on_device({{"x", &x}, {"mean", &mean}, {"rstd", &rstd}});
  if (kind == NormKind::LayerNorm)
    reduce(x, {}, mean, rstd, stream, SumSquares{}, device::SumPairOp{}, Moments{kind, eps});
  else
    reduce(x, {}, rstd, {}, stream, SumSquares{}, device::SumPairOp{}, Moments{kind, eps});
}

void normalize(const TensorView& x, const TensorView& mean, const TensorView& rstd, const TensorView& y,
               cudaStream_t stream) {
  check_matrix("x", x, x);
  check_matrix("y", y, x);
  check_stats("mean", mean, x, Stat::Optional);
  check_stats("rstd", rstd, x, Stat::Required);
  check_map_output("y", y, "x", x, {{"mean", &mean}, {"rstd", &rstd}});
  rows::check_on_device({{"x", &x}, {"y", &y}, {"mean", &mean}, {"rstd", &rstd}});
  map(x, {}, mean, rstd, {}, {}, y, stream, Normalize{});
}

void affine(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& y,
            cudaStream_t stream) {
  check_matrix("x", x, x);
  check_matrix("y", y, x);
  rows::check_column_vector("weight", weight, x.shape[1], x.dtype);
  rows::check_column_vector("bias", bias, x.shape[1], x.dtype);
  check_map_output("y", y, "x", x, {{"weight", &weight}, {"bias", &bias}});
  rows::check_on_device({{"x", &x}, {"y", &y}, {"weight", &weight}, {"bias", &bias}});
  map(x, {}, {}, {}, weight, bias, y, stream, Affine{});
}

void add(const TensorView& x, const TensorView& r, const TensorView& y, cudaStream_t stream) {
  check_matrix("x", x, x);
  check_matrix("r", r, x);
  check_matrix("y", y, x);
  check::disjoint("y", y, "r", r, check::InPlace::Allowed);
  check_map_output("y", y, "x", x, {});
  rows::check_on_device({{"x", &x}, {"r", &r}, {"y", &y}});
  map(x, r, {}, {}, {}, {}, y, stream, Add{});
}

void scale_mask(const TensorView& x, float scale, Causal causal, const TensorView& s, cudaStream_t stream) {
  check_matrix("x", x, x);
  check_matrix("s", s, x);
  check_map_output("s", s, "x", x, {});
  rows::check_on_device({{"x", &x}, {"s", &s}});
  const std::int64_t rows = x.shape[0], n = x.shape[1];
  if (rows == 0 || n == 0) return;
  by_dtype(x.dtype, [&](auto zero) {
    using T = decltype(zero);
    // NOTE: the row index is not an argument of the map op, so the mask is its own kernel here,
    // as a masked_fill is in eager execution.
    device::eager_causal_scale_kernel<T><<<grid_for(rows * n), device::kEagerThreads, 0, stream>>>(
        in<T>(x), out<T>(s), rows, n, scale, causal);
    check_launch("eager_causal_scale_kernel");
  });
}

void row_max(const TensorView& s, const TensorView& max, cudaStream_t stream) {
  check_matrix("s", s, s);
  check_grid_rows("s", s);
  check_stats("max", max, s, Stat::Required);
  check::disjoint_from_each("max", max, {{"s", &s}});
  rows::check_on_device({{"s", &s}, {"max", &max}});
  reduce(s, {}, max, {}, stream, MaxFold{}, device::MaxPairOp{}, Identity{});
}

void row_exp_sum(const TensorView& s, const TensorView& max, const TensorView& sum, cudaStream_t stream) {
  check_matrix("s", s, s);
  check_grid_rows("s", s);
  check_stats("max", max, s, Stat::Required);
  check_stats("sum", sum, s, Stat::Required);
  check::disjoint_from_each("sum", sum, {{"s", &s}, {"max", &max}});
  rows::check_on_device({{"s", &s}, {"max", &max}, {"sum", &sum}});
  reduce(s, max, sum, {}, stream, ExpSumFold{}, device::SumPairOp{}, Identity{});
}

void exp_normalize(const TensorView& s, const TensorView& max, const TensorView& sum, const TensorView& y,
                   cudaStream_t stream) {
  check_matrix("s", s, s);
  check_matrix("y", y, s);
  check_stats("max", max, s, Stat::Required);
  check_stats("sum", sum, s, Stat::Required);
  check_map_output("y", y, "s", s, {{"max", &max}, {"sum", &sum}});
  rows::check_on_device({{"s", &s}, {"y", &y}, {"max", &max}, {"sum", &sum}});
  map(s, {}, max, sum, {}, {}, y, stream, ExpNormalize{});
}

}  // namespace fusekit::eager
