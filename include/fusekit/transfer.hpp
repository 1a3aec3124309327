#pragma once
// Host <-> device copies with conversion to and from double, for references and checks.
#include <cstdint>
#include <span>
#include <vector>

#include "fusekit/tensor.hpp"

namespace fusekit {

// All elements of `t` in logical row-major order, converted to double (synchronous).
std::vector<double> download(const TensorView& t);
// Raw bytes of a packed u8 tensor (e.g. a ReLU mask), in logical order (synchronous).
std::vector<std::uint8_t> download_bytes(const TensorView& t);
// Writes `values` (logical row-major order, rounded to t's dtype) into `t` (synchronous).
void upload(std::span<const double> values, const TensorView& t);

// Host rounding of a double to a dtype and back: what storing in that dtype does.
double round_to(DType t, double v);

}  // namespace fusekit
