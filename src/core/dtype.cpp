#include "fusekit/dtype.hpp"

#include <string>

#include "fusekit/error.hpp"

namespace fusekit {

DType parse_dtype(std::string_view name, std::string_view arg) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::F32},   {"fp32", DType::F32},  {"float32", DType::F32},
      {"f16", DType::F16},   {"fp16", DType::F16},  {"half", DType::F16},
      {"float16", DType::F16}, {"bf16", DType::BF16}, {"bfloat16", DType::BF16},
      {"e4m3", DType::E4M3}, {"fp8", DType::E4M3},  {"fp8e4m3", DType::E4M3},
      {"e5m2", DType::E5M2}, {"fp8e5m2", DType::E5M2}, {"u8", DType::U8},
  };
  for (const auto& a : kAliases)
    if (a.name == name) return a.dtype;
  throw_invalid(arg, "one of f32, f16, bf16, e4m3, e5m2, u8", std::string(name));
}

}  // namespace fusekit
