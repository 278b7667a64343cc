// The conversions of runtime/numeric.h. The f16 rounding is the one that
// ir/scalar_formulas_bits.h writes for kernels, step for step: integer
// rounding of the f32 bits for normal results, and (|x| + 0.5) - 0.5 for
// subnormal ones, which rounds |x| to a multiple of 2^-24 (the f16 subnormal
// spacing, which is the f32 spacing in [0.5, 1)) in the default rounding
// mode. Built with -ffp-contract=off like the rest of kiln.
#include "runtime/numeric.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace kiln {

uint16_t f32ToF16Bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, made quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                        // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                                                    // normal f16: >= 2^-14
    a += 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((a - 0x38000000u) >> 13));
  }
  const float r = (std::bit_cast<float>(a) + 0.5f) - 0.5f;  // a multiple of 2^-24, at most 2^-14
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(r * 16777216.0f));
}

float f16BitsToF32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0)
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(static_cast<float>(m) * 5.9604644775390625e-8f));
  return std::bit_cast<float>(sign | (((static_cast<uint32_t>(h) & 0x7fffu) << 13) + 0x38000000u));
}

uint16_t f32ToBf16Bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN, made quiet
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16BitsToF32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

int64_t floatToIntSaturating(double v, DType to) {
  KILN_ASSERT(to == DType::i32 || to == DType::i64, "floatToIntSaturating to {}", dtypeName(to));
  const double limit = to == DType::i32 ? 2147483648.0 : 9223372036854775808.0;  // 2^31, 2^63
  const int64_t max = to == DType::i32 ? INT32_MAX : INT64_MAX;
  const int64_t min = to == DType::i32 ? INT32_MIN : INT64_MIN;
  if (std::isnan(v)) return 0;
  if (v >= limit) return max;
  if (v <= -limit) return min;
  return static_cast<int64_t>(v);
}

double roundToDType(double v, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(v);
    case DType::f64: return v;
    case DType::f16: return f16BitsToF32(f32ToF16Bits(static_cast<float>(v)));
    case DType::bf16: return bf16BitsToF32(f32ToBf16Bits(static_cast<float>(v)));
    case DType::i32:
    case DType::i64: return static_cast<double>(floatToIntSaturating(v, dtype));
    case DType::boolean: return v != 0 ? 1.0 : 0.0;  // NaN != 0
  }
  return v;
}

namespace {
template <typename T>
void put(void* dst, T v) {
  std::memcpy(dst, &v, sizeof v);
}
}  // namespace

void storeAs(void* dst, DType dtype, double v) {
  switch (dtype) {
    case DType::f32: put(dst, static_cast<float>(v)); break;
    case DType::f64: put(dst, v); break;
    case DType::f16: put(dst, f32ToF16Bits(static_cast<float>(v))); break;
    case DType::bf16: put(dst, f32ToBf16Bits(static_cast<float>(v))); break;
    case DType::i32: put(dst, static_cast<int32_t>(floatToIntSaturating(v, dtype))); break;
    case DType::i64: put(dst, floatToIntSaturating(v, dtype)); break;
    case DType::boolean: put(dst, v != 0); break;
  }
}

void storeIntAs(void* dst, DType dtype, int64_t v) {
  switch (dtype) {
    case DType::i32: put(dst, static_cast<int32_t>(static_cast<uint32_t>(v))); break;
    case DType::i64: put(dst, v); break;
    case DType::boolean: put(dst, v != 0); break;
    // One rounding from the integer (int -> f32 directly, not through double);
    // f16 and bf16 through f32, as `cast` converts them.
    case DType::f32: put(dst, static_cast<float>(v)); break;
    case DType::f64: put(dst, static_cast<double>(v)); break;
    case DType::f16: put(dst, f32ToF16Bits(static_cast<float>(v))); break;
    case DType::bf16: put(dst, f32ToBf16Bits(static_cast<float>(v))); break;
  }
}

}  // namespace kiln
