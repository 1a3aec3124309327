#pragma once
// An epilogue chain as a kernel parameter: plain data, built on the host
// (src/epilogue/device_chain.hpp) and read by the interpreter in chain.cuh.
#include <cstdint>

#include "fusekit/dtype.hpp"
#include "fusekit/epilogue.hpp"

namespace fusekit::device {

inline constexpr int kMaxChainNodes = 8;

struct ChainNode {
  EpilogueOp op;
  float p0, p1;
  DType dtype;
};

// The chain and the tensors its nodes use, passed by value to a kernel.
struct Chain {
  ChainNode nodes[kMaxChainNodes];
  int count;
  int uniform_prefix;  // nodes [0, uniform_prefix) are position-independent
  int gate;            // index of the gated node, or count when there is none
  DType dtype;         // of source, bias, residual and aux
  const void* source; std::int64_t ld_source;
  const void* bias;
  const float* row_scale;
  const float* col_scale;
  const void* residual; std::int64_t ld_residual;
  void* aux; std::int64_t ld_aux;
  const float* quant_scale;  // QuantizeE4M3: one float
  float* amax;               // QuantizeE4M3: max|x| before the scale, or null
};

}  // namespace fusekit::device
