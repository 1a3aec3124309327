// Launchers of the single-op elementwise kernels (fusekit/pointwise.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fusekit/device/pointwise/activation.cuh"
#include "fusekit/device/pointwise/map2d.cuh"
#include "fusekit/error.hpp"
#include "fusekit/pointwise.hpp"
#include "fusekit/runtime.hpp"

namespace fusekit {

namespace {

struct AddBiasOp {
  __device__ float operator()(float x, float b, float) const { return x + b; }
};
struct GeluOp {
  __device__ float operator()(float x, float, float) const { return device::gelu_tanh(x); }
};
struct AddOp {
  __device__ float operator()(float x, float, float r) const { return x + r; }
};

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;  // enough resident warps to keep every SM's loads in flight

int grid_for(std::int64_t work) { return grid_stride_ctas(work, kThreads, kBlocksPerSm); }

// Everything checkable without a device; check_on_device follows once every argument passed.
void check_matrix(std::string_view arg, const TensorView& t) {
  check::structure(arg, t);
  check::rank(arg, t, 2);
  check::dtype(arg, t, {DType::F32, DType::F16, DType::BF16});
}

// y is written element by element after the thread read its x (and r): in place through
// identical views only; nothing else may share y's bytes.
void check_outputs(const TensorView& x, const TensorView& bias, const TensorView& r, const TensorView& y) {
  check::disjoint("y", y, "x", x, check::InPlace::Allowed);
  check::disjoint("y", y, "r", r, check::InPlace::Allowed);
  check::disjoint("y", y, "bias", bias, check::InPlace::Forbidden);
  for (const auto& [arg, t] : {check::NamedView{"x", &x}, check::NamedView{"bias", &bias},
                               check::NamedView{"r", &r}, check::NamedView{"y", &y}})
    if (!t->empty()) check::on_current_device(arg, *t);
}

template <class T, class Op>
void launch(const TensorView& x, const TensorView& bias, const TensorView& r, const TensorView& y, cudaStream_t stream,
            Op op) {
  using V = device::Vector<T>;
  const std::int64_t rows = x.shape[0], cols = x.shape[1];
  if (rows == 0 || cols == 0) return;
  const auto* xp = static_cast<const T*>(x.data);
  const auto* bp = static_cast<const T*>(bias.data);
  const auto* rp = static_cast<const T*>(r.data);
  const std::int64_t ldr = r.empty() ? 0 : r.strides[0];
  auto* yp = static_cast<T*>(y.data);
  auto aligned = [](const TensorView& t) {
    return t.empty() || (reinterpret_cast<std::uintptr_t>(t.data) % device::kVectorBytes == 0 &&
                         (t.rank < 2 || t.strides[0] % V::kElements == 0));
  };
  if (cols % V::kElements == 0 && aligned(x) && aligned(y) && aligned(bias) && aligned(r)) {
    device::map2d_vector_kernel<T, Op><<<grid_for(rows * cols / V::kElements), kThreads, 0, stream>>>(
        xp, x.strides[0], bp, rp, ldr, yp, y.strides[0], rows, cols, op);
    check_launch("map2d_vector_kernel");
  } else {
    device::map2d_scalar_kernel<T, Op><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        xp, x.strides[0], bp, rp, ldr, yp, y.strides[0], rows, cols, op);
    check_launch("map2d_scalar_kernel");
  }
}

template <class Op>
void dispatch(const TensorView& x, const TensorView& bias, const TensorView& r, const TensorView& y,
              cudaStream_t stream, Op op) {
  switch (x.dtype) {
    case DType::F32: return launch<float>(x, bias, r, y, stream, op);
    case DType::F16: return launch<__half>(x, bias, r, y, stream, op);
    case DType::BF16: return launch<__nv_bfloat16>(x, bias, r, y, stream, op);
    default: throw_invalid("x dtype", "f32, f16 or bf16", dtype_name(x.dtype));
  }
}

}  // namespace

void add_bias(const TensorView& x, const TensorView& bias, const TensorView& y, cudaStream_t stream) {
  check_matrix("x", x);
  check_matrix("y", y);
  check::same_shape("y", y, "x", x);
  require(y.dtype == x.dtype, "y dtype", dtype_name(x.dtype), dtype_name(y.dtype));
  check::structure("bias", bias);
  check::shape("bias", bias, {x.shape[1]});
  require(bias.dtype == x.dtype, "bias dtype", dtype_name(x.dtype), dtype_name(bias.dtype));
  check_outputs(x, bias, TensorView{}, y);
  dispatch(x, bias, TensorView{}, y, stream, AddBiasOp{});
}

void gelu(const TensorView& x, const TensorView& y, cudaStream_t stream) {
  check_matrix("x", x);
  check_matrix("y", y);
  check::same_shape("y", y, "x", x);
  require(y.dtype == x.dtype, "y dtype", dtype_name(x.dtype), dtype_name(y.dtype));
  check_outputs(x, TensorView{}, TensorView{}, y);
  dispatch(x, TensorView{}, TensorView{}, y, stream, GeluOp{});
}

void add(const TensorView& x, const TensorView& r, const TensorView& y, cudaStream_t stream) {
  check_matrix("x", x);
  check_matrix("r", r);
  check_matrix("y", y);
  check::same_shape("r", r, "x", x);
  check::same_shape("y", y, "x", x);
  require(r.dtype == x.dtype, "r dtype", dtype_name(x.dtype), dtype_name(r.dtype));
  require(y.dtype == x.dtype, "y dtype", dtype_name(x.dtype), dtype_name(y.dtype));
  check_outputs(x, TensorView{}, r, y);
  dispatch(x, TensorView{}, r, y, stream, AddOp{});
}

}  // namespace fusekit
