#pragma once
// Host entry to step 2 of the norm backward, the parameter gradients' column sums
// (device/norm/norm_backward.cuh). Internal to src/norm, and to its tests.
#include <cuda_runtime_api.h>

#include "fusekit/device/norm/column_sum_plan.hpp"
#include "fusekit/dtype.hpp"

namespace fusekit {

// dw[c] = Σ_k partial_dw[k·n + c] and db likewise (those whose partials are given), as `dtype`
// (f32, f16 or bf16), on the kernel column_sum_kernel(sums) names; returns it. Arguments are the
// launcher's, already validated.
device::ColumnSumKernel launch_norm_column_sums(DType dtype, const device::NormColumnSumParams& sums,
                                                cudaStream_t stream);

}  // namespace fusekit
