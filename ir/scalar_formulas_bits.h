// The f16 and bf16 conversions of the scalar formulas, by bit manipulation on
// the f32 a kernel computes with (see Note [Eager equals compiled] in
// ir/scalar_formulas.h): rounding an f32 to the nearest f16 or bf16 (ties to
// even; inf and NaN kept, NaN made quiet), widening their bits to f32 and
// narrowing a rounded f32 to their bits. Written once with the builder
// primitives, so that the LLVM kernels, the CUDA C kernels (which include no
// header: the conversions are in the generated source) and the C++ evaluator
// agree bit for bit; runtime/numeric.cpp does the same steps in plain C++ for
// tensor factories, and a test checks the two on every bit pattern.
//
// Bit layouts: f32 is s eeeeeeee m{23}, f16 s eeeee m{10} (exponent bias 15,
// so f16 exponent e is f32 exponent e + 112), bf16 the upper 16 bits of f32.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace kiln::ir::formulas {

namespace bits {
/// An i32 constant with the bits of `v`.
template <class B>
typename B::V i32(B& b, uint32_t v) {
  return b.constant(static_cast<double>(static_cast<int32_t>(v)), DType::i32);
}
template <class B>
typename B::V f32(B& b, double v) {
  return b.constant(v, DType::f32);
}
}  // namespace bits

/// f32 `x` rounded to the nearest f16, as an f32.
template <class B>
typename B::V roundF16(B& b, typename B::V x) {
  using V = typename B::V;
  V u = b.bitcast(x, DType::i32);
  V sign = b.band(u, bits::i32(b, 0x80000000u));
  V a = b.band(u, bits::i32(b, 0x7fffffffu));
  // Normal f16 (|x| >= 2^-14): add half an f16 ulp less one, plus the lowest
  // kept bit (ties to even), and drop the 13 bits f16 does not have; a carry
  // moves into the exponent as it should.
  V up = b.add(b.add(a, bits::i32(b, 0xfffu)), b.band(b.lshr(a, 13), bits::i32(b, 1)));
  V normal = b.bor(b.band(up, bits::i32(b, 0xffffe000u)), sign);
  // Subnormal f16: f32 numbers in [0.5, 1) are 2^-24 apart, the f16
  // subnormal spacing, so adding 0.5 rounds |x| to a multiple of 2^-24.
  V ax = b.bitcast(a, DType::f32);
  V sub = b.sub(b.add(ax, bits::f32(b, 0.5)), bits::f32(b, 0.5));
  sub = b.bor(b.bitcast(sub, DType::i32), sign);
  V inf = b.bor(sign, bits::i32(b, 0x7f800000u));  // |x| >= 65520 rounds up to inf
  V nan = b.band(b.bor(u, bits::i32(b, 0x00400000u)), bits::i32(b, 0xffffe000u));
  V r = b.select(b.lt(a, bits::i32(b, 0x38800000u)), sub, normal);
  r = b.select(b.ge(a, bits::i32(b, 0x477ff000u)), inf, r);
  return b.select(b.isNan(x), b.bitcast(nan, DType::f32), b.bitcast(r, DType::f32));
}

/// f32 `x` rounded to the nearest bf16, as an f32.
template <class B>
typename B::V roundBf16(B& b, typename B::V x) {
  using V = typename B::V;
  V u = b.bitcast(x, DType::i32);
  // Integer addition wraps, and only NaN patterns could carry out of the sign.
  V up = b.add(b.add(u, bits::i32(b, 0x7fffu)), b.band(b.lshr(u, 16), bits::i32(b, 1)));
  V r = b.band(up, bits::i32(b, 0xffff0000u));
  V nan = b.band(b.bor(u, bits::i32(b, 0x00400000u)), bits::i32(b, 0xffff0000u));
  return b.select(b.isNan(x), b.bitcast(nan, DType::f32), b.bitcast(r, DType::f32));
}

/// The f32 of f16 bits `h` (an i32 in [0, 0xffff]), exact.
template <class B>
typename B::V widenF16(B& b, typename B::V h) {
  using V = typename B::V;
  V sign = b.shl(b.band(h, bits::i32(b, 0x8000u)), 16);
  V e = b.band(b.lshr(h, 10), bits::i32(b, 0x1fu));
  V m = b.band(h, bits::i32(b, 0x3ffu));
  V normal = b.bor(sign, b.add(b.shl(b.band(h, bits::i32(b, 0x7fffu)), 13), bits::i32(b, 0x38000000u)));
  V special = b.bor(b.bor(sign, bits::i32(b, 0x7f800000u)), b.shl(m, 13));
  V sub = b.mul(b.convert(m, DType::f32), bits::f32(b, 5.9604644775390625e-8));  // m * 2^-24
  sub = b.bor(b.bitcast(sub, DType::i32), sign);
  V r = b.select(b.eq(e, bits::i32(b, 0x1fu)), special, normal);
  r = b.select(b.eq(e, bits::i32(b, 0)), sub, r);
  return b.bitcast(r, DType::f32);
}

/// The f32 of bf16 bits `h` (an i32 in [0, 0xffff]), exact.
template <class B>
typename B::V widenBf16(B& b, typename B::V h) {
  return b.bitcast(b.shl(h, 16), DType::f32);
}

/// The f16 bits (an i32 in [0, 0xffff]) of `x`, an f32 that roundF16 gave.
template <class B>
typename B::V narrowF16(B& b, typename B::V x) {
  using V = typename B::V;
  V u = b.bitcast(x, DType::i32);
  V sign = b.band(b.lshr(u, 16), bits::i32(b, 0x8000u));
  V a = b.band(u, bits::i32(b, 0x7fffffffu));
  V special = b.bor(bits::i32(b, 0x7c00u), b.band(b.lshr(a, 13), bits::i32(b, 0x3ffu)));  // inf, NaN
  V normal = b.lshr(b.sub(a, bits::i32(b, 0x38000000u)), 13);
  // A subnormal f16 is a multiple of 2^-24 below 2^-14: |x| * 2^24 is its
  // integer mantissa, exactly. (NaN and inf lanes convert to something that
  // the selects below drop.)
  V sub = b.convert(b.mul(b.bitcast(a, DType::f32), bits::f32(b, 16777216.0)), DType::i32);
  V r = b.select(b.lt(a, bits::i32(b, 0x38800000u)), sub, normal);
  r = b.select(b.ge(a, bits::i32(b, 0x7f800000u)), special, r);
  return b.bor(r, sign);
}

/// The bf16 bits (an i32 in [0, 0xffff]) of `x`, an f32 that roundBf16 gave.
template <class B>
typename B::V narrowBf16(B& b, typename B::V x) {
  return b.lshr(b.bitcast(x, DType::i32), 16);
}

}  // namespace kiln::ir::formulas
