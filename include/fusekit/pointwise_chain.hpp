#pragma once
// The pointwise chain: any epilogue description (fusekit/epilogue.hpp) applied to every element
// of a row-major matrix in one kernel, reading each input once and writing each output once:
//   y[i, j] = chain(x[i, ·])[j]
// The same description the GEMM epilogues take, so an elementwise tail that cannot ride on a GEMM
// (or follows a reduction) runs fused all the same. x: [M, N] f32, f16 or bf16, unit column
// stride, any row stride; the chain's tensors (bias, residual, source, aux) have x's dtype;
// y: [M, epilogue_output_columns(N)] in x's dtype, or e4m3 when the chain ends in quantize_e4m3.
// Rows, tensors and gate blocks that are whole 16-byte aligned vectors take the vector kernel;
// others the element-by-element one. Every argument is validated before any launch.
#include <cuda_runtime_api.h>

#include "fusekit/epilogue.hpp"
#include "fusekit/tensor.hpp"

namespace fusekit {

struct PointwiseChainArgs {
  EpilogueSpec chain;
  TensorView x;             // [M, N]
  EpilogueTensors tensors;  // what the chain's nodes read and write (checked by validate())
  TensorView y;             // [M, epilogue_output_columns(chain, N)]
};

void pointwise_chain(const PointwiseChainArgs& args, cudaStream_t stream = nullptr);

}  // namespace fusekit
