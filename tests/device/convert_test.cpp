// float → e4m3 from the float's bits (the path before sm_89 and on the host) against the CUDA
// toolkit's conversion through double: every float16 bit pattern's value, values around every
// e4m3 rounding midpoint, the saturation edge, infinities and NaN; and the paired conversion
// (float2_to_e4m3x2) as two single ones, the first value in the low byte.
#include "fusekit/device/convert.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace fusekit::device {
namespace {

unsigned ours(float v) { return float_to_e4m3(v).__x; }
unsigned toolkit(float v) { return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); }

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

TEST(FloatToE4m3, MatchesTheToolkitOnEveryHalfValue) {
  constexpr std::uint32_t kHalfPatterns = 1u << 16;
  for (std::uint32_t h = 0; h < kHalfPatterns; ++h) {
    __half_raw raw;
    raw.x = static_cast<unsigned short>(h);
    const float v = __half2float(__half(raw));
    if (std::isnan(v)) continue;  // NaN payloads differ; checked below
    ASSERT_EQ(ours(v), toolkit(v)) << v;
  }
}

TEST(FloatToE4m3, RoundsHalfToEvenAtEveryMidpoint) {
  // Each e4m3 code's value and the midpoint to the next code, and one float ulp either side.
  for (unsigned code = 0; code < kE4m3MaxFiniteBits; ++code) {
    __nv_fp8_e4m3 lo, hi;
    lo.__x = static_cast<__nv_fp8_storage_t>(code);
    hi.__x = static_cast<__nv_fp8_storage_t>(code + 1);
    const float mid = 0.5f * (float(lo) + float(hi));
    for (const float v : {float(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      EXPECT_EQ(ours(v), toolkit(v)) << v;
      EXPECT_EQ(ours(-v), toolkit(-v)) << -v;
    }
  }
}

TEST(FloatToE4m3, SaturatesAndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const float v : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, inf, from_bits(0x7F7FFFFFu)}) {
    EXPECT_EQ(ours(v), kE4m3MaxFiniteBits) << v;
    EXPECT_EQ(ours(-v), 0x80u | kE4m3MaxFiniteBits) << -v;
  }
  EXPECT_EQ(ours(std::numeric_limits<float>::quiet_NaN()) & kE4m3NanBits, kE4m3NanBits);
  EXPECT_EQ(ours(0.0f), 0u);
  EXPECT_EQ(ours(-0.0f), 0x80u);
  EXPECT_EQ(ours(from_bits(1)), 0u);  // the smallest float subnormal rounds to zero
}

TEST(FloatToE4m3, PairsConvertAsTwoSingles) {
  const float values[] = {0.0f, -0.0f, 1.0f, -3.25f, 0.013f, 447.0f, 500.0f, -1e6f, 1e-3f, 0.5f};
  for (const float a : values)
    for (const float b : values) {
      const unsigned pair = float2_to_e4m3x2(a, b);
      EXPECT_EQ(pair & 0xFFu, ours(a)) << a << ", " << b;
      EXPECT_EQ(pair >> 8, ours(b)) << a << ", " << b;
    }
}

}  // namespace
}  // namespace fusekit::device
