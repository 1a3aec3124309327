#pragma once
// The (kind, dtype) cases every norm GPU suite runs, forward and backward, and their names
// (layernorm_f32 … rmsnorm_bf16, which the scripts' test filters use).
#include <gtest/gtest.h>

#include <string>

#include "fusekit/dtype.hpp"
#include "fusekit/norm.hpp"

namespace fusekit::testing {

struct NormCase {
  NormKind kind;
  DType dtype;
};

inline auto norm_cases() {
  return ::testing::Values(NormCase{NormKind::LayerNorm, DType::F32}, NormCase{NormKind::LayerNorm, DType::F16},
                           NormCase{NormKind::LayerNorm, DType::BF16}, NormCase{NormKind::RmsNorm, DType::F32},
                           NormCase{NormKind::RmsNorm, DType::F16}, NormCase{NormKind::RmsNorm, DType::BF16});
}

inline std::string norm_case_name(const ::testing::TestParamInfo<NormCase>& info) {
  return std::string(info.param.kind == NormKind::LayerNorm ? "layernorm_" : "rmsnorm_") +
         std::string(dtype_name(info.param.dtype));
}

}  // namespace fusekit::testing
