// Launcher of the fused softmax backward (fusekit/softmax_backward.hpp): validation, layout
// choice, dtype and layout dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "../row/row_launch.cuh"
#include "fusekit/device/softmax/softmax_backward.cuh"
#include "fusekit/softmax_backward.hpp"

namespace fusekit {

namespace {

// Rows split over a cluster (vector access) run softmax_backward_cluster_kernel on persistent
// clusters, each a block of consecutive rows: two-chunk CTAs (two rows per push) while their
// cluster stays within device::kMaxTwoChunkCluster, four-chunk CTAs (one row per push) beyond.
// The rows whose dot products go per push (the kernel's kExchangeRows; kExchangeGroupsStaged
// groups of them staged, y and dy): two on two-chunk CTAs (16 KB planes), one on the wide CTAs
// (32 KB planes), 192 KB of shared memory either way at 512 threads.
constexpr int kTwoChunkExchangeRows = 2, kWideExchangeRows = 1;
template <class T>
void launch_clustered(device::SoftmaxBackwardParams p, std::int64_t n, DType dtype, cudaStream_t stream) {
  constexpr const char* kName = "softmax_backward_cluster_kernel";
  const auto run = [&](auto kernel, const device::RowLayout& layout, std::size_t shared_bytes) {
    p.layout = layout;
    const std::int64_t groups = std::min(p.rows, rows::resident_groups(kernel, layout, shared_bytes, kName));
    p.rows_per_group = (p.rows + groups - 1) / groups;
    const std::int64_t used = (p.rows + p.rows_per_group - 1) / p.rows_per_group;
    rows::launch(kernel, layout, used, p, stream, kName, shared_bytes);
  };
  using device::LoopingTwoTensorRows;
  using device::WideClusterRows;
  const device::RowLayout two = device::plan_rows<LoopingTwoTensorRows>(n, static_cast<int>(dtype_size(dtype)),
                                                                        rows::max_cluster_ctas());
  if (!device::takes_wide_clusters(two)) {
    run(device::softmax_backward_cluster_kernel<T, LoopingTwoTensorRows, kTwoChunkExchangeRows>, two,
        device::softmax_backward_cluster_bytes<T, LoopingTwoTensorRows, kTwoChunkExchangeRows>(two));
  } else {
    const device::RowLayout wide = rows::plan<WideClusterRows>("y", n, dtype);
    run(device::softmax_backward_cluster_kernel<T, WideClusterRows, kWideExchangeRows>, wide,
        device::softmax_backward_cluster_bytes<T, WideClusterRows, kWideExchangeRows>(wide));
  }
}

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
  const device::Access access =
      rows::shifted_access_for(device::kChunkBytes / sizeof(T), shape.n, {&a.y, &a.dy, &a.dx});
  const device::RowLayout held = device::plan_rows<device::TwoTensorRows>(
      shape.n, static_cast<int>(sizeof(T)), rows::max_cluster_ctas());
  if (access == device::Access::Vector && rows::max_cluster_ctas() > 1 && (!held.valid() || held.cluster > 1))
    return launch_clustered<T>(p, shape.n, a.y.dtype, stream);
  rows::with_access<rows::Accesses::VectorScalarShifted>(access, [&](auto kAccess) {
    using Config = rows::ConfigFor<device::TwoTensorRows, kAccess>;
    p.layout = rows::plan<Config>("y", shape.n, a.y.dtype, device::kPreferredRowThreads, kAccess);
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
  // A row of y and dy is read whole (Σ y·dy) before dx is written: in place through their views.
  check::disjoint("dx", a.dx, "dy", a.dy, check::InPlace::Allowed);
  check::disjoint("dx", a.dx, "y", a.y, check::InPlace::Allowed);
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
