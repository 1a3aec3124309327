#pragma once
// Norm + fp8 e4m3 quantize in one pass: the output is ready to be an fp8 GEMM's A operand, with
// the dequantization scale cuBLASLt takes (y ≈ q·scale):
//   q = saturate_e4m3(norm(x)·w + b) / scale)
// PerTensor: scale is given (delayed scaling; amax, when given, receives max |y| for the next
// step's scale). PerRow: scale[row] = max_j |y[row, j]| / 448 is written (1 for an all-zero row).
// A NaN in y makes its row's scale NaN and the amax NaN.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "fusekit/norm.hpp"

namespace fusekit {

enum class Fp8ScaleMode : std::uint8_t { PerTensor, PerRow };

struct NormQuantizeArgs {
  NormForwardArgs norm;  // norm.y: e4m3, x's shape
  Fp8ScaleMode scale_mode = Fp8ScaleMode::PerTensor;
  TensorView scale;      // f32: PerTensor [1] (input), PerRow one per row, packed (output)
  TensorView amax;       // optional f32 [1]: max |y| (NaN if any y is) is atomically max-ed into it (zero it first)
};

void norm_quantize_forward(const NormQuantizeArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
