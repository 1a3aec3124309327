// Launcher of the fused softmax forward (fusekit/softmax.hpp): validation, layout choice, dtype
// and layout dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "../row/row_launch.cuh"
#include "fusekit/device/softmax/softmax_forward.cuh"
#include "fusekit/softmax.hpp"

namespace fusekit {

namespace {


template <class T>
void launch(const SoftmaxForwardArgs& a, const rows::RowShape& shape, cudaStream_t stream) {
  device::SoftmaxForwardParams p;
  p.x = rows::address(a.x);
  p.y = rows::address(a.y);
  p.rows = shape.rows;
  p.rows_per_batch = shape.rows_per_batch;
  p.n = static_cast<int>(shape.n);
  p.scale_log2 = a.scale * device::kLog2e;
  p.causal = a.causal;
  const device::Access access = rows::shifted_access_for(device::kChunkBytes / sizeof(T), shape.n, {&a.x, &a.y});
  const bool plain = a.causal == Causal::No && p.scale_log2 > 0.0f;
  const device::Residence residence = rows::residence_for(access, shape.n, a.x.dtype, device::kSharedSoftmaxMinChunks);
  rows::with_placement<rows::Residences::RegistersShared, rows::Accesses::VectorScalarShifted>(
      access, residence, [&](auto kAccess, auto kResidence) {
        using Config = rows::ResidentConfig<device::OneTensorRows, kAccess, kResidence>;
        p.layout = rows::plan<Config>("x", shape.n, a.x.dtype, device::kPreferredRowThreads, kAccess);
        const auto go = [&](auto kernel) {
          rows::launch(kernel, p.layout, shape.rows, p, stream, "softmax_forward_kernel",
                       rows::shared_bytes<kResidence, T, Config>(p.layout));
        };
        if (plain) go(device::softmax_forward_kernel<T, Config, kAccess, kResidence, device::SoftmaxLogits::Plain>);
        else go(device::softmax_forward_kernel<T, Config, kAccess, kResidence, device::SoftmaxLogits::General>);
      });
}

}  // namespace

void softmax_forward(const SoftmaxForwardArgs& a, cudaStream_t stream) {
  const rows::RowShape shape = rows::check_rows("x", a.x, {DType::F32, DType::F16, DType::BF16});
  rows::check_like("y", a.y, "x", a.x, a.x.dtype);
  require(std::isfinite(a.scale), "scale", "finite", a.scale);
  require(a.causal == Causal::No || a.causal == Causal::Yes, "causal", "No or Yes", static_cast<int>(a.causal));
  // A row is read whole (its max and sum) before any of it is written: in place through x's view.
  check::disjoint("y", a.y, "x", a.x, check::InPlace::Allowed);
  rows::check_on_device({{"x", &a.x}, {"y", &a.y}});
  if (shape.rows == 0) return;
  switch (a.x.dtype) {
    case DType::F32: return launch<float>(a, shape, stream);
    case DType::F16: return launch<__half>(a, shape, stream);
    case DType::BF16: return launch<__nv_bfloat16>(a, shape, stream);
    default: throw_invalid("x dtype", "f32, f16 or bf16", dtype_name(a.x.dtype));
  }
}

}  // namespace fusekit
