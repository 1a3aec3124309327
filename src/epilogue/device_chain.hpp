#pragma once
// The device form (device::Chain) of an EpilogueSpec and its bound tensors: what the portable
// GEMM's epilogue and the pointwise chain kernel take as a kernel parameter. No fmt here:
// included by .cu files.
#include "fusekit/device/epilogue/chain_params.hpp"
#include "fusekit/epilogue.hpp"

namespace fusekit::epilogue {

// Whether a node reads or writes nothing but its own value (safe on any register layout).
bool position_independent(EpilogueOp op);

// The chain of `spec` with `tensors` bound; `dtype` is that of its source, bias, residual and
// aux tensors. The spec is validated by the caller (fusekit::validate).
device::Chain make_device_chain(const EpilogueSpec& spec, const EpilogueTensors& tensors, DType dtype);

}  // namespace fusekit::epilogue
