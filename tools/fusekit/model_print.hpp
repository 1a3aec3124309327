#pragma once
// What the CLI prints before (or, without a GPU, instead of) running a ladder: the model's
// FLOPs, minimum bytes and floors for each rung.
#include <cstdint>
#include <string>

#include "fusekit/dtype.hpp"

namespace fusekit::tools {

// The traffic model of the linear ladder at one shape, one line per rung, on datasheet roofs.
std::string linear_model_summary(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype);

}  // namespace fusekit::tools
