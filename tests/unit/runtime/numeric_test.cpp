// Tests of runtime/numeric.h: f16 and bf16 conversions (known values, the
// overflow and subnormal boundaries, round trips of every bit pattern, and a
// sweep against independent references: the compiler's _Float16, and a
// nearest-candidate search for bf16), the saturating float-to-integer
// conversion, and storing a double as each dtype.
#include "runtime/numeric.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Half, KnownValues) {
  EXPECT_EQ(f32ToF16Bits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(f32ToBf16Bits(1.0f / 3.0f), 0x3eab);
  EXPECT_EQ(f32ToF16Bits(1.0f), 0x3c00);
  EXPECT_EQ(f32ToF16Bits(-2.0f), 0xc000);
  EXPECT_EQ(f32ToF16Bits(0.0f), 0x0000);
  EXPECT_EQ(f32ToF16Bits(-0.0f), 0x8000);
  EXPECT_EQ(f32ToF16Bits(kInf), 0x7c00);
  EXPECT_EQ(f32ToF16Bits(-kInf), 0xfc00);
  EXPECT_EQ(f32ToF16Bits(kNaN) & 0x7e00, 0x7e00) << "a quiet NaN";
  EXPECT_EQ(f32ToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(f32ToBf16Bits(-kInf), 0xff80);
  EXPECT_EQ(f32ToBf16Bits(kNaN) & 0x7fc0, 0x7fc0);
  // A signalling NaN stays a NaN (its payload would truncate to inf otherwise).
  EXPECT_TRUE(std::isnan(f16BitsToF32(f32ToF16Bits(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16BitsToF32(f32ToBf16Bits(std::bit_cast<float>(0x7f800001u)))));
}

TEST(Half, OverflowBoundary) {
  EXPECT_EQ(f32ToF16Bits(65504.0f), 0x7bff);  // the largest f16
  EXPECT_EQ(f32ToF16Bits(65519.996f), 0x7bff);
  EXPECT_EQ(f32ToF16Bits(65520.0f), 0x7c00) << "the tie rounds to even: inf";
  EXPECT_EQ(f32ToF16Bits(-65520.0f), 0xfc00);
  EXPECT_EQ(f32ToF16Bits(1e10f), 0x7c00);
  EXPECT_EQ(f32ToBf16Bits(std::numeric_limits<float>::max()), 0x7f80) << "rounds up to inf";
}

TEST(Half, Subnormals) {
  EXPECT_EQ(f32ToF16Bits(std::ldexp(1.0f, -24)), 0x0001);  // the smallest f16
  EXPECT_EQ(f32ToF16Bits(std::ldexp(1.0f, -25)), 0x0000) << "a tie with 0 rounds to even";
  EXPECT_EQ(f32ToF16Bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32ToF16Bits(std::ldexp(3.0f, -25)), 0x0002) << "1.5 * 2^-24 ties to 2 * 2^-24";
  EXPECT_EQ(f32ToF16Bits(-std::ldexp(1.0f, -26)), 0x8000) << "-0";
  EXPECT_EQ(f32ToF16Bits(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(f32ToF16Bits(std::ldexp(1023.5f, -24)), 0x0400) << "rounds up into the normals";
  EXPECT_EQ(f16BitsToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16BitsToF32(0x83ff), -std::ldexp(1023.0f, -24));
  // bf16 has f32's exponent range: f32 subnormals round like the rest.
  EXPECT_EQ(f32ToBf16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32ToBf16Bits(std::bit_cast<float>(0x00018000u)), 0x0002);
}

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = f16BitsToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16BitsToF32(f32ToF16Bits(f)))) << std::hex << h;
      continue;
    }
    EXPECT_EQ(f32ToF16Bits(f), h) << std::hex << h;
    const float b = bf16BitsToF32(static_cast<uint16_t>(h));
    if (!std::isnan(b)) {
      EXPECT_EQ(f32ToBf16Bits(b), h) << std::hex << h;
    }
  }
}

/// The nearest bf16 to `x` by comparing the two candidates around it in
/// double, ties to the even one.
uint16_t referenceBf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  const double dl = std::fabs(static_cast<double>(std::bit_cast<float>(lo)) - x);
  const double dh = std::fabs(static_cast<double>(std::bit_cast<float>(hi)) - x);
  if (dl < dh || (dl == dh && ((lo >> 16) & 1) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}

TEST(Half, AgreesWithIndependentReferences) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int k = 0; k < 4000000; ++k) {
    // Random patterns, and patterns near the f16 rounding points (low 13 bits near 0x1000).
    uint32_t u = bits(rng);
    if (k % 2) u = (u & 0xffffe000u) | (0x0ff8u + (u & 0xf));
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) continue;
    if (std::fabs(x) < 3.3e38f) {
      EXPECT_EQ(f32ToBf16Bits(x), referenceBf16(x)) << x;
    }
#if defined(__FLT16_MANT_DIG__)
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    EXPECT_EQ(f32ToF16Bits(x), want) << x;
#endif
    ++checked;
  }
  EXPECT_GT(checked, 3000000);
}

TEST(Numeric, SaturatingFloatToInt) {
  EXPECT_EQ(floatToIntSaturating(kNaN, DType::i32), 0);
  EXPECT_EQ(floatToIntSaturating(1e10, DType::i32), INT32_MAX);
  EXPECT_EQ(floatToIntSaturating(-1e10, DType::i32), INT32_MIN);
  EXPECT_EQ(floatToIntSaturating(2.9, DType::i32), 2);
  EXPECT_EQ(floatToIntSaturating(-2.9, DType::i32), -2);
  EXPECT_EQ(floatToIntSaturating(2147483647.9, DType::i32), INT32_MAX);
  EXPECT_EQ(floatToIntSaturating(-2147483648.9, DType::i32), INT32_MIN);
  EXPECT_EQ(floatToIntSaturating(INFINITY, DType::i64), INT64_MAX);
  EXPECT_EQ(floatToIntSaturating(-INFINITY, DType::i64), INT64_MIN);
  EXPECT_EQ(floatToIntSaturating(9.3e18, DType::i64), INT64_MAX);
  EXPECT_EQ(floatToIntSaturating(-9.2233720368547758e18, DType::i64), INT64_MIN);
}

TEST(Numeric, StoreAsEachDType) {
  unsigned char buf[8];
  auto as = [&](DType d, double v) {
    std::memset(buf, 0xab, sizeof buf);
    storeAs(buf, d, v);
    uint64_t out = 0;
    std::memcpy(&out, buf, static_cast<size_t>(itemSize(d)));
    return out;
  };
  EXPECT_EQ(as(DType::f16, 1.0 / 3.0), 0x3555u);
  EXPECT_EQ(as(DType::bf16, 1.0 / 3.0), 0x3eabu);
  EXPECT_EQ(as(DType::i32, 1e10), 0x7fffffffu);
  EXPECT_EQ(as(DType::i32, -7.5), 0xfffffff9u);
  EXPECT_EQ(as(DType::boolean, -0.0), 0u);
  EXPECT_EQ(as(DType::boolean, NAN), 1u);
  EXPECT_EQ(as(DType::f32, 0.1), std::bit_cast<uint32_t>(0.1f));
  EXPECT_EQ(as(DType::f64, 0.1), std::bit_cast<uint64_t>(0.1));
  storeIntAs(buf, DType::i32, (int64_t{1} << 32) + 5);
  int32_t i32;
  std::memcpy(&i32, buf, 4);
  EXPECT_EQ(i32, 5) << "integers wrap";
  EXPECT_EQ(roundToDType(65520.0, DType::f16), INFINITY);
  EXPECT_EQ(roundToDType(NAN, DType::i64), 0.0);
}

TEST(Numeric, DTypeOfElementTypes) {
  static_assert(dtypeOf<float>() == DType::f32 && dtypeOf<double>() == DType::f64);
  static_assert(dtypeOf<Half>() == DType::f16 && dtypeOf<BFloat16>() == DType::bf16);
  static_assert(dtypeOf<int32_t>() == DType::i32 && dtypeOf<int64_t>() == DType::i64);
  static_assert(dtypeOf<bool>() == DType::boolean);
  Half h = 0.1f;
  EXPECT_EQ(h.bits, 0x2e66);
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x3c00)), 1.0f);
  BFloat16 b = 3.0f;
  EXPECT_EQ(static_cast<float>(b), 3.0f);
}

}  // namespace
}  // namespace kiln
