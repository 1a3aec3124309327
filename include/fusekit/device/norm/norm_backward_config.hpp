#pragma once
// The row config of the norm backward (device/norm/norm_backward.cuh), apart so host code (the
// launcher's limits, tests) reads it without CUDA. Pure constexpr C++.
#include "fusekit/device/row/row_config.hpp"

namespace fusekit::device {

// The backward passes that loop over rows hold x and dy: two chunks of each per thread.
// NOTE: the row loop also keeps 2·(columns per thread) f32 accumulators live (32 registers for
// 16-bit types), so CTAs are capped at 512 threads, which allows up to 128 registers; 64-register
// kernels with a loop over rows spill (docs/performance.md).
using LoopingTwoTensorRows = RowConfig<2, kMaxRowThreads / 2>;
// Rows that LoopingTwoTensorRows splits over clusters of more than two CTAs: four chunks per
// thread, so half the CTAs per cluster. An H200 holds 66 clusters of 2 (every SM), but 30 of 4
// and 15 of 8 (120 SMs): a cluster's CTAs share a GPC. Their weight is staged in shared memory
// (its 16 registers spilled the loop) and one row goes per cluster push (norm_backward.cuh).
using WideClusterRows = RowConfig<4, kMaxRowThreads / 2>;

}  // namespace fusekit::device
