#pragma once
// Element types fusekit moves and computes with.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fusekit {

enum class DType : std::uint8_t {
  F32,   // IEEE binary32
  F16,   // IEEE binary16
  BF16,  // bfloat16
  E4M3,  // fp8, 4 exponent bits, 3 mantissa bits (finite-only, max 448)
  E5M2,  // fp8, 5 exponent bits, 2 mantissa bits (max 57344)
  U8,    // raw bytes: bit masks (e.g. cuBLASLt's ReLU aux mask)
};

inline constexpr float kE4m3Max = 448.0f;  // the largest finite e4m3 value

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::E4M3:
    case DType::E5M2:
    case DType::U8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
    case DType::U8: return "u8";
  }
  return "?";
}

constexpr bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }
constexpr bool is_float(DType t) { return dtype_size(t) != 0 && t != DType::U8; }  // a DType value, not raw bytes

// Parses "f32", "fp32", "float32", "f16", "fp16", "half", "bf16", "e4m3", "fp8", "e5m2", "u8".
// Throws fusekit::Error naming `arg` when the name is unknown.
DType parse_dtype(std::string_view name, std::string_view arg = "dtype");

}  // namespace fusekit
