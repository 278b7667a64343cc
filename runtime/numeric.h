// Element types and conversions with kiln's cast semantics, in plain C++:
// the 16-bit float types Half (f16) and BFloat16 (bf16) with their
// conversions to and from f32 (round to nearest even; inf and NaN kept, NaN
// made quiet), the saturating float-to-integer conversion (truncate toward
// zero, clamp to the type's range, NaN -> 0), and dtypeOf<T>(), the DType of
// a C++ element type. Tensor factories and accessors convert with these;
// kernels compute the same conversions from ir/scalar_formulas_bits.h, and
// tests/unit/ir checks the two agree on every f16 and bf16 bit pattern.
#pragma once

#include <cstdint>
#include <type_traits>

#include "runtime/dtype.h"

namespace kiln {

/// f32 -> f16 bits, round to nearest even; |x| >= 65520 gives inf.
uint16_t f32ToF16Bits(float x);
/// f16 bits -> f32, exact.
float f16BitsToF32(uint16_t bits);
/// f32 -> bf16 bits, round to nearest even.
uint16_t f32ToBf16Bits(float x);
/// bf16 bits -> f32, exact.
float bf16BitsToF32(uint16_t bits);

/// An IEEE binary16 element (dtype f16), converting to and from float
/// implicitly, like c10::Half.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float x) : bits(f32ToF16Bits(x)) {}               // NOLINT: implicit on purpose
  operator float() const { return f16BitsToF32(bits); }  // NOLINT
  static Half fromBits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

/// A bfloat16 element (dtype bf16): the upper half of an f32.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float x) : bits(f32ToBf16Bits(x)) {}           // NOLINT: implicit on purpose
  operator float() const { return bf16BitsToF32(bits); }  // NOLINT
  static BFloat16 fromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

/// `v` converted to integer dtype `to` (i32 or i64) as `cast` does: toward
/// zero, saturating at the type's limits, NaN -> 0.
int64_t floatToIntSaturating(double v, DType to);

/// `v` as a value of `dtype`, widened back to double: what a constant or a
/// scalar of that dtype holds (f16/bf16 through f32, as `cast` rounds them).
double roundToDType(double v, DType dtype);

/// Stores `v` converted to `dtype` (as roundToDType) at `dst`.
void storeAs(void* dst, DType dtype, double v);
/// Stores the integer `v` as `dtype`: i32 and i64 wrap, floats round, bool is v != 0.
void storeIntAs(void* dst, DType dtype, int64_t v);

/// The DType of C++ element type T: float f32, double f64, Half f16,
/// BFloat16 bf16, int32_t i32, int64_t i64, bool bool.
template <typename T>
constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::f16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::bf16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::boolean;
  else
    static_assert(sizeof(T) == 0, "not a kiln element type");
}

/// Whether T is one of the element types of dtypeOf().
template <typename T>
inline constexpr bool isElementType =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, bool>;

}  // namespace kiln
