// Launcher of the fused softmax backward (fusekit/softmax_backward.hpp): validation, layout
// choice, dtype and layout dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "../row/row_launch.cuh"
#include "fusekit/device/softmax/softmax_backward.cuh"
#include "fusekit/softmax_backward.hpp"

namespace fusekit {

namespace {

template <class T>
void launch(const SoftmaxBackwardArgs& a, const rows::RowShape& shape, cudaStream_t stream) {
  device::SoftmaxBackwardParams p;
  p.y = rows::address(a.y);
  p.dy = rows::address(a.dy);
  p.dx = rows::address(a.dx);
  p.rows = shape.rows;
  p.rows_per_batch = shape.rows_per_batch;
  p.n = static_cast<int>(shape.n);
  p.scale = a.scale;
  const device::Access access = rows::access_for(device::kChunkBytes / sizeof(T), shape.n, {&a.y, &a.dy, &a.dx});
  rows::with_access(access, [&](auto kAccess) {
    using Config = rows::ConfigFor<device::TwoTensorRows, kAccess>;
    p.layout = rows::plan<Config>("y", shape.n, a.y.dtype);
    rows::launch(device::softmax_backward_kernel<T, Config, kAccess>, p.layout, shape.rows, p, stream,
                 "softmax_backward_kernel");
  });
}

}  // namespace

void softmax_backward(const SoftmaxBackwardArgs& a, cudaStream_t stream) {
  const rows::RowShape shape = rows::check_rows("y", a.y, {DType::F32, DType::F16, DType::BF16});
  rows::check_like("dy", a.dy, "y", a.y, a.y.dtype);
  rows::check_like("dx", a.dx, "y", a.y, a.y.dtype);
  require(std::isfinite(a.scale), "scale", "finite", a.scale);
  rows::check_on_device({{"y", &a.y}, {"dy", &a.dy}, {"dx", &a.dx}});
  if (shape.rows == 0) return;
  switch (a.y.dtype) {
    case DType::F32: return launch<float>(a, shape, stream);
    case DType::F16: return launch<__half>(a, shape, stream);
    case DType::BF16: return launch<__nv_bfloat16>(a, shape, stream);
    default: throw_invalid("y dtype", "f32, f16 or bf16", dtype_name(a.y.dtype));
  }
}

}  // namespace fusekit
