// Launchers of the fused norm backward (fusekit/norm_backward.hpp): validation, layout and
// row-block plan, workspace carving, dtype and layout dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "../row/row_launch.cuh"
#include "fusekit/device/norm/norm_backward.cuh"
#include "fusekit/norm_backward.hpp"
#include "norm_column_sums.hpp"

namespace fusekit {

namespace {

using device::NormBackwardParams;

constexpr std::initializer_list<DType> kFloatTypes = {DType::F32, DType::F16, DType::BF16};
constexpr std::size_t kWorkspaceAlignment = device::kChunkBytes;  // the partials take 16-byte stores
// NOTE: each CTA group writes one [n] row of partials per gradient, read back once by the column
// sums: at 8 or more rows per group that traffic stays under a third of the rows' own (x, dy
// read; dx written) even for the shortest rows, and under 4% at 32768 × 4096.
constexpr std::int64_t kMinStepsPerGroup = 8;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::size_t aligned_bytes(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}
// One gradient's partials: an [n] f32 row per CTA group.
std::size_t partial_bytes_for(std::int64_t groups, std::int64_t n) {
  return aligned_bytes(static_cast<std::size_t>(groups * n) * sizeof(float));
}

// How the rows are dealt to CTA groups: group k takes row steps [k·steps_per_group, …).
struct RowBlocks {
  device::RowLayout layout;
  std::int64_t steps = 0;            // rows_per_cta rows each
  std::int64_t steps_per_group = 0;
  std::int64_t groups = 0;           // CTA groups (a CTA, or a cluster for split rows)
  // The kernel that runs them, its dynamic shared memory and its name (for errors).
  void (*kernel)(NormBackwardParams) = nullptr;
  std::size_t shared_bytes = 0;
  const char* name = "";
  std::size_t partial_bytes(std::int64_t n) const { return partial_bytes_for(groups, n); }
};

// Whether rows of `layout` run norm_backward_staged_kernel: vector rows of one CTA of at most
// kStagedBackwardMaxThreads threads (2048–4096 16-bit columns).
// NOTE: measured on the H200 (session 18, bf16, 2^27 elements, GB/s): staged, LayerNorm backward
// 3514 → 3616 at 2048 columns, 3460 → 3511 at 4096, RMSNorm 3500 → 3559 at 4096; but 3413 →
// 3260 at 8192 (one 512-thread CTA per SM), and rows split over clusters lost 6–15 % (LayerNorm
// 2355 → 2212 / 1313 → 1188 / 1203 → 1083 at 16384 / 32768 / 65536): there the cluster
// reduction of every row bounds the loop, not the loads in flight.
constexpr int kStagedBackwardMaxThreads = 256;
template <device::Access kAccess>
bool staged_rows(const device::RowLayout& layout) {
  return kAccess == device::Access::Vector && layout.cluster == 1 && layout.rows_per_cta == 1 &&
         layout.threads <= kStagedBackwardMaxThreads;
}

// The staged kernel and its dynamic shared memory (rows::RowLaunch allows it).
template <class T>
auto staged_kernel(const device::RowLayout& layout) {
  using Config = device::LoopingTwoTensorRows;
  return std::pair{&device::norm_backward_staged_kernel<T, Config>, device::norm_backward_staged_bytes<T, Config>(layout)};
}

// The cluster kernel and its dynamic shared memory.
template <class T>
auto cluster_kernel(const device::RowLayout& layout) {
  using Config = device::LoopingTwoTensorRows;
  return std::pair{&device::norm_backward_cluster_kernel<T, Config>, device::norm_backward_cluster_bytes<T, Config>(layout)};
}

enum class Placement : std::uint8_t { Loop, Staged, Cluster, WideCluster };

// Where rows of n elements of `dtype` run: vector rows split over a cluster (sm_90) on the
// cluster kernels, vector rows of one small CTA staged, others in the register loop.
template <device::Access kAccess>
Placement placement_of(std::int64_t n, DType dtype) {
  using Config = rows::ConfigFor<device::LoopingTwoTensorRows, kAccess>;
  const int max_cluster = rows::max_cluster_ctas();
  const device::RowLayout two = device::plan_rows<Config>(n, static_cast<int>(dtype_size(dtype)), max_cluster);
  if (kAccess == device::Access::Vector && max_cluster > 1 && (!two.valid() || two.cluster > 1))
    return device::takes_wide_clusters(two) ? Placement::WideCluster : Placement::Cluster;
  return two.valid() && staged_rows<kAccess>(two) ? Placement::Staged : Placement::Loop;
}

// Whether any kernel of `kAccess` holds rows of n elements of `dtype`.
template <device::Access kAccess>
bool holds(std::int64_t n, DType dtype) {
  using Config = rows::ConfigFor<device::LoopingTwoTensorRows, kAccess>;
  const int element = static_cast<int>(dtype_size(dtype));
  const int max_cluster = rows::max_cluster_ctas();
  return placement_of<kAccess>(n, dtype) == Placement::WideCluster
             ? device::plan_rows<device::WideClusterRows>(n, element, max_cluster).valid()
             : device::plan_rows<Config>(n, element, max_cluster).valid();
}

// The wide cluster kernel and its dynamic shared memory.
// NOTE: measured on the H200 (session 19, bf16, GB/s): LayerNorm backward at 24576 / 32768 / 49152 /
// 65536 columns 2964 / 3015 / 2548 / 2821 in clusters of 3 / 4 / 6 / 8 two-chunk CTAs, 3432 /
// 3377 / 3146 / 3111 in clusters of 2 / 2 / 3 / 4 four-chunk CTAs; RMSNorm 65536 2960 → 3346.
template <class T>
auto wide_cluster_kernel(const device::RowLayout& layout) {
  using Config = device::WideClusterRows;
  return std::pair{&device::norm_backward_cluster_kernel<T, Config, 1>, device::norm_backward_cluster_bytes<T, Config, 1>(layout)};
}

// As many groups as stay resident on the device (one wave: every group loops over its block),
// but at least kMinStepsPerGroup steps per group.
template <class T, device::Access kAccess>
RowBlocks plan_blocks(std::int64_t rows, std::int64_t n, DType dtype) {
  using Config = rows::ConfigFor<device::LoopingTwoTensorRows, kAccess>;
  RowBlocks b;
  switch (placement_of<kAccess>(n, dtype)) {
    case Placement::WideCluster:
      // Half as many CTAs per cluster, of four chunks each.
      b.layout = rows::plan<device::WideClusterRows>("x", n, dtype);
      std::tie(b.kernel, b.shared_bytes) = wide_cluster_kernel<T>(b.layout);
      b.name = "norm_backward_cluster_kernel";
      break;
    case Placement::Cluster:
      b.layout = rows::plan<Config>("x", n, dtype);
      std::tie(b.kernel, b.shared_bytes) = cluster_kernel<T>(b.layout);
      b.name = "norm_backward_cluster_kernel";
      break;
    case Placement::Staged:
      b.layout = rows::plan<Config>("x", n, dtype);
      std::tie(b.kernel, b.shared_bytes) = staged_kernel<T>(b.layout);
      b.name = "norm_backward_staged_kernel";
      break;
    case Placement::Loop:
      b.layout = rows::plan<Config>("x", n, dtype);
      b.kernel = device::norm_backward_kernel<T, Config, kAccess>;
      b.name = "norm_backward_kernel";
      break;
  }
  const std::int64_t resident = rows::resident_groups(b.kernel, b.layout, b.shared_bytes, b.name);
  b.steps = ceil_div(rows, b.layout.rows_per_cta);
  const std::int64_t wanted = std::max<std::int64_t>(1, std::min(resident, b.steps / kMinStepsPerGroup));
  b.steps_per_group = ceil_div(b.steps, wanted);
  b.groups = ceil_div(b.steps, b.steps_per_group);
  return b;
}

// The workspace of one variant, or 0 when it does not hold rows of n elements.
template <class T, device::Access kAccess>
std::size_t variant_workspace_bytes(std::int64_t rows, std::int64_t n, DType dtype) {
  if (!holds<kAccess>(n, dtype)) return 0;
  return 2 * plan_blocks<T, kAccess>(rows, n, dtype).partial_bytes(n);
}

// The larger of the two variants' needs: which one runs depends on strides and alignment.
template <class T>
std::size_t workspace_bytes(std::int64_t rows, std::int64_t n, DType dtype) {
  using device::Access;
  const std::size_t bytes = std::max(variant_workspace_bytes<T, Access::Vector>(rows, n, dtype),
                                     variant_workspace_bytes<T, Access::Scalar>(rows, n, dtype));
  // Neither holds the row: rows::plan throws the Unsupported error that names the limit.
  if (bytes == 0) {
    if (rows::max_cluster_ctas() > 1) rows::plan<device::WideClusterRows>("x", n, dtype);
    rows::plan<device::LoopingTwoTensorRows>("x", n, dtype);
  }
  return bytes;
}

enum class ParamGrads : std::uint8_t { None, Wanted };

ParamGrads param_grads(const NormBackwardArgs& a) {
  return a.dweight.empty() && a.dbias.empty() ? ParamGrads::None : ParamGrads::Wanted;
}

std::size_t workspace_bytes_of(const NormBackwardArgs& a) {
  return static_cast<std::size_t>(a.workspace.numel()) * a.workspace.element_size();
}

rows::RowShape validate(const NormBackwardArgs& a) {
  require(a.kind == NormKind::LayerNorm || a.kind == NormKind::RmsNorm, "kind", "LayerNorm or RmsNorm",
          static_cast<int>(a.kind));
  const rows::RowShape shape = rows::check_rows("x", a.x, kFloatTypes);
  rows::check_like("dy", a.dy, "x", a.x, a.x.dtype);
  rows::check_like("dx", a.dx, "x", a.x, a.x.dtype);
  rows::check_column_vector("weight", a.weight, shape.n, a.x.dtype);
  rows::check_column_vector("dweight", a.dweight, shape.n, a.x.dtype);
  rows::check_column_vector("dbias", a.dbias, shape.n, a.x.dtype);
  if (a.kind == NormKind::LayerNorm) {
    require(!a.mean.empty(), "mean", "the forward's per-row mean (LayerNorm)", "empty");
  } else {
    require(a.mean.empty(), "mean", "empty for RMSNorm (it has no mean)", a.mean.describe());
  }
  rows::check_row_stats("mean", a.mean, shape.rows);
  require(!a.rstd.empty(), "rstd", "the forward's per-row rstd", "empty");
  rows::check_row_stats("rstd", a.rstd, shape.rows);
  if (param_grads(a) == ParamGrads::Wanted && shape.rows > 0) {
    check::structure("workspace", a.workspace);
    require(a.workspace.is_contiguous(), "workspace layout", "packed", a.workspace.describe());
    check::aligned("workspace", a.workspace, kWorkspaceAlignment);
    // NOTE: every plan deals the rows to at least one CTA group, and to exactly one below
    // 2·kMinStepsPerGroup rows: the one group's partials are the least any device needs. The
    // exact need follows from the occupancy queries and is checked before the launch.
    const std::size_t one_group = 2 * partial_bytes_for(1, shape.n);
    require(workspace_bytes_of(a) >= one_group, "workspace bytes",
            "at least " + std::to_string(one_group) + " (one CTA group's partials; norm_backward_workspace_bytes "
            "gives the need on the current device)",
            workspace_bytes_of(a));
  }
  // Each row's dx is written after the row of x and dy is read (rows staged ahead are others):
  // in place through their views only.
  check::disjoint("dx", a.dx, "dy", a.dy, check::InPlace::Allowed);
  check::disjoint("dx", a.dx, "x", a.x, check::InPlace::Allowed);
  // The other outputs are written while every input is still read, dweight and dbias from the
  // workspace's partials after the rows (the workspace only where they are wanted).
  const TensorView none;
  const TensorView* const workspace =
      param_grads(a) == ParamGrads::Wanted && shape.rows > 0 ? &a.workspace : &none;
  check::disjoint_from_each("dx", a.dx, {{"weight", &a.weight}, {"mean", &a.mean}, {"rstd", &a.rstd},
                                         {"dweight", &a.dweight}, {"dbias", &a.dbias}, {"workspace", workspace}});
  for (const auto& [arg, out] : {check::NamedView{"dweight", &a.dweight}, check::NamedView{"dbias", &a.dbias},
                                 check::NamedView{"workspace", workspace}})
    check::disjoint_from_each(arg, *out, {{"x", &a.x}, {"dy", &a.dy}, {"weight", &a.weight}, {"mean", &a.mean},
                                          {"rstd", &a.rstd}});
  check::disjoint_from_each("dweight", a.dweight, {{"dbias", &a.dbias}, {"workspace", workspace}});
  check::disjoint_from_each("dbias", a.dbias, {{"workspace", workspace}});
  rows::check_on_device({{"x", &a.x}, {"dy", &a.dy}, {"dx", &a.dx}, {"weight", &a.weight}, {"mean", &a.mean},
                         {"rstd", &a.rstd}, {"dweight", &a.dweight}, {"dbias", &a.dbias},
                         {"workspace", &a.workspace}});
  return shape;
}

// Step 2 on the kernel column_sum_kernel names.
template <class T>
device::ColumnSumKernel launch_column_sums(const device::NormColumnSumParams& sums, cudaStream_t stream) {
  using device::ColumnSumKernel;
  const ColumnSumKernel kernel = device::column_sum_kernel(sums);
  switch (kernel) {
    case ColumnSumKernel::ByColumn: {
      const auto ctas = static_cast<unsigned>(ceil_div(sums.n, device::kColumnSumColumnThreads));
      device::norm_column_sum_by_column_kernel<T><<<ctas, device::kColumnSumColumnThreads, 0, stream>>>(sums);
      check_launch("norm_column_sum_by_column_kernel");
      break;
    }
    case ColumnSumKernel::Tile: {
      const auto tiles = static_cast<unsigned>(ceil_div(sums.n, device::kColumnSumTileColumns));
      device::norm_column_sum_tile_kernel<T><<<tiles, device::kColumnSumTileThreads, 0, stream>>>(sums);
      check_launch("norm_column_sum_tile_kernel");
      break;
    }
    case ColumnSumKernel::ManyGroups: {
      const auto tiles = static_cast<unsigned>(ceil_div(sums.n, device::kWarpThreads));
      device::norm_column_sum_kernel<T><<<tiles, device::kColumnSumWarps * device::kWarpThreads, 0, stream>>>(sums);
      check_launch("norm_column_sum_kernel");
      break;
    }
  }
  return kernel;
}

template <class T>
void launch(const NormBackwardArgs& a, const rows::RowShape& shape, cudaStream_t stream) {
  constexpr int kChunkElements = device::kChunkBytes / sizeof(T);
  NormBackwardParams p;
  p.x = rows::address(a.x);
  p.dy = rows::address(a.dy);
  p.dx = rows::address(a.dx);
  p.weight = a.weight.data;
  p.mean = static_cast<const float*>(a.mean.data);
  p.rstd = static_cast<const float*>(a.rstd.data);
  p.rows = shape.rows;
  p.rows_per_batch = shape.rows_per_batch;
  p.n = static_cast<int>(shape.n);
  p.kind = a.kind;
  const device::Access access = rows::access_for(kChunkElements, shape.n, {&a.x, &a.dy, &a.dx, &a.weight});
  rows::with_access(access, [&](auto kAccess) {
    const RowBlocks blocks = plan_blocks<T, kAccess>(shape.rows, shape.n, a.x.dtype);
    p.layout = blocks.layout;
    p.steps = blocks.steps;
    p.steps_per_group = blocks.steps_per_group;
    device::NormColumnSumParams sums;
    if (param_grads(a) == ParamGrads::Wanted) {
      const std::size_t partial = blocks.partial_bytes(shape.n);
      const std::size_t have = workspace_bytes_of(a);
      require(have >= 2 * partial, "workspace bytes", "at least norm_backward_workspace_bytes = " +
                                                          std::to_string(norm_backward_workspace_bytes(
                                                              shape.rows, shape.n, a.x.dtype)),
              have);
      auto* base = static_cast<char*>(a.workspace.data);
      if (!a.dweight.empty()) p.partial_dw = reinterpret_cast<float*>(base);
      if (!a.dbias.empty()) p.partial_db = reinterpret_cast<float*>(base + partial);
      sums = {p.partial_dw, p.partial_db, a.dweight.data, a.dbias.data, blocks.groups, p.n};
    }
    // NOTE: only the register loop packs rows into a CTA (rows_per_cta > 1).
    rows::launch(blocks.kernel, p.layout, blocks.groups * p.layout.rows_per_cta, p, stream, blocks.name,
                 blocks.shared_bytes);
    if (param_grads(a) == ParamGrads::Wanted) launch_column_sums<T>(sums, stream);
  });
}

// Dispatch on the dtype: f(T{}) with T the element type.
template <class F>
decltype(auto) with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::F32: return f(float{});
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
    default: throw_invalid("x dtype", "f32, f16 or bf16", dtype_name(dtype));
  }
}

}  // namespace

std::size_t norm_backward_workspace_bytes(std::int64_t rows, std::int64_t n, DType dtype) {
  require(rows >= 0, "rows", ">= 0", rows);
  require(n >= 1, "row length", ">= 1", n);
  if (rows == 0) return 0;
  return with_type(dtype, [&](auto t) { return workspace_bytes<decltype(t)>(rows, n, dtype); });
}

void norm_backward(const NormBackwardArgs& args, cudaStream_t stream) {
  const rows::RowShape shape = validate(args);
  if (shape.rows == 0) {
    // NOTE: sums over no rows are 0, whose bit pattern is all zeros in every float dtype.
    for (const TensorView* t : {&args.dweight, &args.dbias})
      if (!t->empty()) check_cuda(cudaMemsetAsync(t->data, 0, t->span_bytes(), stream), "norm_backward zero sums");
    return;
  }
  with_type(args.x.dtype, [&](auto t) { launch<decltype(t)>(args, shape, stream); });
}

device::ColumnSumKernel launch_norm_column_sums(DType dtype, const device::NormColumnSumParams& sums,
                                                cudaStream_t stream) {
  return with_type(dtype, [&](auto t) { return launch_column_sums<decltype(t)>(sums, stream); });
}

}  // namespace fusekit
