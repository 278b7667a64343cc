// The scalar formula of every elementwise op, written once (DESIGN.md §3).
//
// Note [Eager equals compiled]
// Every renderer (LLVM IR for the CPU, CUDA C for NVRTC) and the C++
// evaluator used by constant folding and tests instantiate emitScalar() with
// their own builder, so each op means the same sequence of IEEE operations
// everywhere. Transcendentals (exp, log, tanh, sigmoid, sin, cos, erf, gelu,
// silu, softplus, pow) are polynomials and argument reductions built from
// +, -, *, /, rint, sqrt, compares, selects and exponent bit tricks (some in
// double-double arithmetic, ir/scalar_formulas_f64.h), never a libm or
// device-library call: libm differs between the host and the GPU
// and between scalar and vector code, a polynomial does not. No operation is
// contracted into an FMA (LLVM emits plain fmul/fadd, NVRTC gets
// --fmad=false, C++ is built with -ffp-contract=off). So an elementwise
// chain gives the same bits eager or fused, on the CPU, on CUDA and folded.
//
// Dtypes. A value is computed in its compute dtype (computeDType): f16 and
// bf16 in f32, every other dtype in itself. Loads widen f16/bf16 to f32
// exactly; every op (and constant) whose result is f16 or bf16 is rounded to
// it, to nearest even, before anything uses it (roundTo(), applied in one
// place: the end of emitScalar); stores narrow the rounded f32 exactly. That
// is what eager runs one op at a time, and what PyTorch's eager ops do, so
// fusing a chain of f16 ops never changes a bit. Integers wrap (two's
// complement, no undefined overflow); bool is 0/1.
//
// Accuracy (f32, measured by tests/unit/ir/scalar_formulas_test.cpp and
// scalar_formulas_math_test.cpp / _pow_test.cpp against the libm in f64 or
// long double): exp, log ≤ 2 ulp; tanh, sigmoid ≤ 4 ulp away from zero
// crossings; sqrt, +, -, *, /, abs exact; rsqrt correctly rounded (every f32
// checked); sin, cos and pow computed in f64 and rounded once (≤ 0.5 ulp +
// 2^-20: correctly rounded on every sampled input; sin and cos over the
// whole f32 range); erf ≤ 2 ulp, silu ≤ 3, gelu ≤ 8 (its tanh form ≤ 8 +
// 8|u| ulp, u its tanh's argument), softplus ≤ 2. exp(x) is 0 below x =
// -87.34 (about 2^-126) and may be a denormal of reduced accuracy just
// above it; so are sigmoid, silu, erf's, gelu's and softplus' tails, which
// use it. The f64 formulas are
// in ir/scalar_formulas_f64.h, with their own accuracy. Integer pow is
// PyTorch's (repeated squaring, wrapping).
//
// A builder B provides:
//   using V = ...;  // a scalar of one compute dtype: f32, f64, i32, i64, bool
//   using M = ...;  // a predicate
//   DType dtype;                       the dtype c() makes constants of; set
//                                      by emitScalar to the op's compute dtype
//   V c(double v)                      constant(v, dtype)
//   V constant(double v, DType t)      v converted as `cast` converts a double
//                                      (floats round to nearest, integers
//                                      saturate, bool is v != 0)
//   V intConstant(int64_t v, DType t)  integer dtype t (i32, i64, bool)
//                                      holding v exactly, which it fits
//                                      (Note [Integer constants are exact])
//   V add(V,V), sub(V,V), mul(V,V), neg(V)   IEEE for floats; integers wrap
//   V div(V,V), sqrt(V), rint(V)       floats only; rint rounds half to even
//   M lt, gt, le, ge, eq (V,V)         ordered for floats (false with NaN);
//                                      signed for integers; false < true
//   M ne(V,V)                          unordered for floats (true with NaN)
//   M isNan(V)                         false for integers and bool
//   M orM(M,M), andM(M,M), notM(M)
//   V select(M, V a, V b)              a where the predicate holds, else b
//   V pow2(V n)                        2^n for integer-valued n, in the
//                                      exponent range of n's type (f32: [-126,
//                                      127], f64: [-1022, 1023])
//   V mantissa(V x), exponent(V x)     x = mantissa * 2^exponent, mantissa in
//                                      [0.5, 1), for finite normal x > 0
//   V bitcast(V, DType t)              the same bits as t: f32 <-> i32, f64 <-> i64
//   V band(V,V), bor(V,V), bxor(V,V)   integers: bitwise and, or, xor
//   V shl(V, int n), lshr(V, int n)    integers: shifts by a constant, lshr
//                                      logical (zeros shifted in)
//   V convert(V x, DType t)            x as compute dtype t, with the
//                                      semantics of `cast` (docs/ops.md):
//                                      float -> int truncates and saturates
//                                      (NaN -> 0), int -> float rounds to
//                                      nearest even, f64 -> f32 rounds,
//                                      anything -> bool is x != 0 (NaN ->
//                                      true), bool -> number is 0 or 1; the
//                                      identity when x is already t
//   V fromM(M), M toM(V)               a predicate as a bool value and back
#pragma once

#include <cmath>
#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/scalar_formulas_bits.h"
#include "ir/scalar_formulas_f64.h"
#include "ir/scalar_formulas_random.h"
#include "runtime/error.h"

namespace kiln::ir::formulas {

/// The dtype values of `dtype` are computed in: f16 and bf16 in f32.
constexpr DType computeDType(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16 ? DType::f32 : dtype; }

/// max(a, b) that propagates NaN from either side, like torch.maximum.
template <class B>
typename B::V maximum(B& b, typename B::V x, typename B::V y) {
  return b.select(b.orM(b.gt(x, y), b.isNan(x)), x, y);
}

template <class B>
typename B::V minimum(B& b, typename B::V x, typename B::V y) {
  return b.select(b.orM(b.lt(x, y), b.isNan(x)), x, y);
}

/// exp(x) in f32: Cody-Waite reduction x = n ln2 + r and a degree-6
/// polynomial (Cephes expf coefficients), scaled by 2^n built from exponent bits.
template <class B>
typename B::V exp(B& b, typename B::V x) {
  using V = typename B::V;
  const V hi = b.c(88.72283172607421875), lo = b.c(-87.3365478515625);
  // Clamp; NaN passes through (both compares are false) and is restored at the end.
  V xc = b.select(b.gt(x, hi), hi, b.select(b.lt(x, lo), lo, x));
  V n = b.rint(b.mul(xc, b.c(1.44269504088896341)));
  V r = b.sub(b.sub(xc, b.mul(n, b.c(0.693359375))), b.mul(n, b.c(-2.12194440e-4)));
  V z = b.mul(r, r);
  V p = b.c(1.9875691500E-4);
  p = b.add(b.mul(p, r), b.c(1.3981999507E-3));
  p = b.add(b.mul(p, r), b.c(8.3334519073E-3));
  p = b.add(b.mul(p, r), b.c(4.1665795894E-2));
  p = b.add(b.mul(p, r), b.c(1.6666665459E-1));
  p = b.add(b.mul(p, r), b.c(5.0000001201E-1));
  V y = b.add(b.add(b.mul(p, z), r), b.c(1.0));
  // 2^n with n up to 128 would overflow the exponent field: scale in two steps.
  V half = b.rint(b.mul(n, b.c(0.5)));
  y = b.mul(b.mul(y, b.pow2(half)), b.pow2(b.sub(n, half)));
  y = b.select(b.gt(x, hi), b.c(INFINITY), y);
  y = b.select(b.lt(x, lo), b.c(0.0), y);
  return b.select(b.isNan(x), x, y);
}

/// Cephes logf's polynomial P(f), log(1 + f) = f - f²/2 + f³ P(f) for f
/// in [sqrt(1/2) - 1, sqrt(2) - 1).
template <class B>
typename B::V logPoly(B& b, typename B::V f) {
  typename B::V p = b.c(7.0376836292E-2);
  for (double k : {-1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                   2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1})
    p = b.add(b.mul(p, f), b.c(k));
  return p;
}

/// log(x) in f32: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-9
/// polynomial in m - 1 (Cephes logf coefficients); denormals are scaled up first.
template <class B>
typename B::V log(B& b, typename B::V x) {
  using V = typename B::V;
  const V tiny = b.c(1.17549435e-38);
  auto isTiny = b.lt(x, tiny);
  V xs = b.select(isTiny, b.mul(x, b.c(8388608.0)), x);  // * 2^23
  V pos = b.select(b.gt(xs, b.c(0.0)), xs, b.c(1.0));    // keep the math finite
  pos = b.select(b.lt(pos, b.c(INFINITY)), pos, b.c(1.0));
  V m = b.mantissa(pos);
  V e = b.sub(b.exponent(pos), b.select(isTiny, b.c(23.0), b.c(0.0)));
  auto small = b.lt(m, b.c(0.707106781186547524));
  e = b.select(small, b.sub(e, b.c(1.0)), e);
  V f = b.select(small, b.sub(b.add(m, m), b.c(1.0)), b.sub(m, b.c(1.0)));
  V z = b.mul(f, f);
  V y = b.mul(b.mul(logPoly(b, f), f), z);
  y = b.add(y, b.mul(e, b.c(-2.12194440e-4)));
  y = b.sub(y, b.mul(z, b.c(0.5)));
  V r = b.add(b.add(f, y), b.mul(e, b.c(0.693359375)));
  // Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, NaN stays.
  r = b.select(b.lt(x, b.c(0.0)), b.c(NAN), r);
  r = b.select(b.orM(b.lt(x, b.c(0.0)), b.gt(x, b.c(0.0))), r, b.c(-INFINITY));
  r = b.select(b.gt(x, b.c(3.40282347e+38)), b.c(INFINITY), r);
  return b.select(b.isNan(x), x, r);
}

/// log(1 + x) in f32 for x >= 0 (log1pWith with Cephes logf's polynomial).
template <class B>
typename B::V log1p(B& b, typename B::V x) {
  auto nearZero = [&](typename B::V f) {
    typename B::V z = b.mul(f, f);
    return b.add(f, b.sub(b.mul(b.mul(logPoly(b, f), f), z), b.mul(z, b.c(0.5))));
  };
  return log1pWith(b, x, nearZero, [&](typename B::V u) { return log(b, u); });
}

/// tanh(x) in f32: an odd polynomial for |x| < 0.625 (Cephes tanhf), else
/// sign(x) (1 - 2 / (exp(2|x|) + 1)).
template <class B>
typename B::V tanh(B& b, typename B::V x) {
  using V = typename B::V;
  auto negative = b.lt(x, b.c(0.0));
  V ax = b.select(negative, b.neg(x), x);
  V z = b.mul(x, x);
  V p = b.c(-5.70498872745E-3);
  p = b.add(b.mul(p, z), b.c(2.06390887954E-2));
  p = b.add(b.mul(p, z), b.c(-5.37397155531E-2));
  p = b.add(b.mul(p, z), b.c(1.33314422036E-1));
  p = b.add(b.mul(p, z), b.c(-3.33332819422E-1));
  V small = b.add(b.mul(b.mul(p, z), x), x);
  // tanh(-0) = -0: the sum above turns -0 into +0, so zeros pass through.
  small = b.select(b.orM(negative, b.gt(x, b.c(0.0))), small, x);
  V big = b.sub(b.c(1.0), b.div(b.c(2.0), b.add(exp(b, b.add(ax, ax)), b.c(1.0))));
  big = b.select(negative, b.neg(big), big);
  return b.select(b.lt(ax, b.c(0.625)), small, big);
}

/// sigmoid(x) = 1 / (1 + exp(-x)), in f32.
template <class B>
typename B::V sigmoid(B& b, typename B::V x) {
  return b.div(b.c(1.0), b.add(b.c(1.0), exp(b, b.neg(x))));
}

/// Runs `f` with the builder's constants in f64 (b.c makes f64 values), for
/// f32 formulas that compute in f64; restores b.dtype after.
template <class B, class F>
typename B::V inF64(B& b, F f) {
  const DType saved = b.dtype;
  b.dtype = DType::f64;
  typename B::V r = f();
  b.dtype = saved;
  return r;
}

/// |x|. Floats clear the sign bit, so abs(-0) = +0 and abs(NaN) is NaN;
/// integers wrap, so abs(INT_MIN) = INT_MIN (as in PyTorch).
template <class B>
typename B::V absolute(B& b, typename B::V x) {
  if (b.dtype == DType::f32 || b.dtype == DType::f64) {
    const DType bits = b.dtype == DType::f64 ? DType::i64 : DType::i32;
    return b.bitcast(b.lshr(b.shl(b.bitcast(x, bits), 1), 1), b.dtype);
  }
  return b.select(b.lt(x, b.c(0.0)), b.neg(x), x);
}

/// 1/sqrt(x) in f32: computed in f64 and rounded once. The f64 value is
/// within 1 f64 ulp, so the f32 result is correctly rounded unless the true
/// value lies within 2^-29 f32 ulp of a halfway point; checked exhaustively
/// (every positive f32 is correctly rounded; tests/unit/ir/scalar_formulas_test.cpp
/// states how).
template <class B>
typename B::V rsqrt(B& b, typename B::V x) {
  typename B::V xd = b.convert(x, DType::f64);
  return b.convert(inF64(b, [&] { return rsqrt64(b, xd); }), DType::f32);
}

/// sin(x) or cos(x) of an f32, computed in f64 and rounded once (within
/// 0.5 ulp plus 2^-20 ulp, so at most 1 ulp). The reduction is exact over
/// the whole f32 range without tables: x 2/pi mod 4 is the sum of x c_k mod 4
/// over seven 29-bit pieces c_k of 2/pi, each product exact (x has 24
/// significant bits) and so is its remainder; the sum is carried in
/// double-double, and the pieces past the seventh are worth less than 2^-75
/// even at FLT_MAX. Then j = the nearest integer, r = (the rest) pi/2, and the
/// f64 kernels of ir/scalar_formulas_f64.h.
template <class B>
typename B::V sinCos(B& b, typename B::V x, bool cosine) {
  using V = typename B::V;
  V xd = b.convert(x, DType::f64);
  V y = inF64(b, [&] {
    V ax = b.select(b.lt(xd, b.c(0.0)), b.neg(xd), xd);
    auto finite = b.lt(ax, b.c(INFINITY));
    V xs = b.select(finite, xd, b.c(0.0));  // inf, NaN: restored at the end
    DD<B> s{b.c(0.0), b.c(0.0)};
    for (double piece : {0x1.45f306dp-1, 0x1.9391054p-30, 0x1.4fe13abp-59, 0x1.d1f534dp-88, 0x1.b81b6c5p-117,
                         0x1.5993c4p-148, 0x1.c820ff2p-175}) {
      V p = b.mul(xs, b.c(piece));
      V rest = b.sub(p, b.mul(b.c(4.0), b.rint(b.mul(p, b.c(0.25)))));  // p mod 4, in [-2, 2]
      DD<B> t = twoSum(b, s.hi, rest);
      s = {t.hi, b.add(s.lo, t.lo)};
    }
    V j = b.rint(s.hi);
    DD<B> f = twoSum(b, b.sub(s.hi, j), s.lo);
    DD<B> r = ddMul(b, f, DD<B>{b.c(0x1.921fb54442d18p+0), b.c(0x1.1a62633145c07p-54)});  // pi/2
    V v = sinCosQuadrant(b, r.hi, r.lo, j, cosine);
    if (!cosine) v = b.select(b.eq(xd, b.c(0.0)), xd, v);  // sin(+-0) = +-0
    return b.select(finite, v, b.c(NAN));
  });
  return b.convert(y, DType::f32);
}

/// erf(x) for |x| <= 1 in f32: x T(x²) (Cephes ndtrf.c), evaluated as
/// x + x (T(x²) - 1), whose rounding errors count a ninth as much.
template <class B>
typename B::V erfSmall(B& b, typename B::V x) {
  using V = typename B::V;
  V z = b.mul(x, x);
  V p = b.c(7.853861353153693E-5);
  for (double k : {-8.010193625184903E-4, 5.188327685732524E-3, -2.685381193529856E-2, 1.128358514861418E-1,
                   -3.761262582423300E-1, 0.12837916572670993})  // T's last coefficient, 1.12837916572671, less 1
    p = b.add(b.mul(p, z), b.c(k));
  return b.add(x, b.mul(x, p));
}

/// erfc(a + aLow) for a in [1, 10] in f32: exp(-a²) (1/a) P(1/a²) below 2,
/// R(1/a²) above (Cephes ndtrf.c), with (a + aLow)² in double-double so that
/// exp(-a²) keeps its accuracy (erfcLarge64 says why). It is 0 where exp
/// flushes, past a = 9.35.
template <class B>
typename B::V erfcLarge(B& b, typename B::V a, typename B::V aLow) {
  using V = typename B::V;
  DD<B> a2 = twoProd(b, a, a);
  a2.lo = b.add(a2.lo, b.mul(b.add(a, a), aLow));
  V e = b.mul(exp(b, b.neg(a2.hi)), b.sub(b.c(1.0), a2.lo));
  V q = b.div(b.c(1.0), a);
  V z = b.mul(q, q);
  V p = b.c(2.326819970068386E-2);
  for (double k : {-1.387039388740657E-1, 3.687424674597105E-1, -5.824733027278666E-1, 6.210004621745983E-1,
                   -4.944515323274145E-1, 3.404879937665872E-1, -2.741127028184656E-1, 5.638259427386472E-1})
    p = b.add(b.mul(p, z), b.c(k));
  V r = b.c(-1.047766399936249E1);
  for (double k : {1.297719955372516E1, -7.495518717768503E0, 2.921019019210786E0, -1.015265279202700E0,
                   4.218463358204948E-1, -2.820767439740514E-1, 5.641895067754075E-1})
    r = b.add(b.mul(r, z), b.c(k));
  return b.mul(b.mul(e, q), b.select(b.lt(a, b.c(2.0)), p, r));
}

/// erf(x) in f32: erfSmall for |x| <= 1, else sign(x) (1 - erfc(|x|)).
template <class B>
typename B::V erf(B& b, typename B::V x) {
  using V = typename B::V;
  V ax = b.select(b.lt(x, b.c(0.0)), b.neg(x), x);
  auto small = b.le(ax, b.c(1.0));
  V a = b.select(small, b.c(1.0), b.select(b.lt(ax, b.c(10.0)), ax, b.c(10.0)));  // NaN: 10, restored below
  V big = b.sub(b.c(1.0), erfcLarge(b, a, b.c(0.0)));
  big = b.select(b.lt(x, b.c(0.0)), b.neg(big), big);
  V y = b.select(small, erfSmall(b, x), big);
  return b.select(b.isNan(x), x, y);
}

/// gelu(x) = x/2 (1 + erf(x/sqrt 2)) in f32, the factor for x < 0 being
/// erfc(|x|/sqrt 2) computed directly, as geluErf64 explains.
template <class B>
typename B::V geluErf(B& b, typename B::V x) {
  using V = typename B::V;
  DD<B> z = timesSqrtHalf(b, x);
  auto negative = b.lt(z.hi, b.c(0.0));
  V az = b.select(negative, b.neg(z.hi), z.hi), azLow = b.select(negative, b.neg(z.lo), z.lo);
  auto small = b.le(az, b.c(1.0)), below = b.lt(az, b.c(10.0));  // NaN: neither
  V s = erfSmall(b, b.select(small, az, b.c(0.0)));
  V c = erfcLarge(b, b.select(small, b.c(1.0), b.select(below, az, b.c(10.0))),
                  b.select(b.andM(b.notM(small), below), azLow, b.c(0.0)));
  V up = b.select(small, b.add(b.c(1.0), s), b.sub(b.c(2.0), c));
  V down = b.select(small, b.sub(b.c(1.0), s), c);
  return b.mul(b.mul(x, b.c(0.5)), b.select(b.lt(x, b.c(0.0)), down, up));
}

/// gelu with the tanh approximation in f32: x / (1 + exp(-2u)), u =
/// sqrt(2/pi) (x + 0.044715 x³), as geluTanh64 explains.
template <class B>
typename B::V geluTanh(B& b, typename B::V x) {
  using V = typename B::V;
  V inner = b.mul(b.c(0.7978845608028654), b.add(x, b.mul(b.c(0.044715), b.mul(b.mul(x, x), x))));
  return b.div(x, b.add(b.c(1.0), exp(b, b.mul(inner, b.c(-2.0)))));
}

/// silu(x) = x / (1 + exp(-x)) in f32.
template <class B>
typename B::V silu(B& b, typename B::V x) {
  return b.div(x, b.add(b.c(1.0), exp(b, b.neg(x))));
}

/// softplus's attributes `beta` and `threshold` (floats), PyTorch's 1 and
/// 20 where they are missing.
struct SoftplusAttrs {
  double beta = 1.0, threshold = 20.0;
};
inline SoftplusAttrs softplusAttrs(const Attributes& attrs) {
  SoftplusAttrs a;
  if (attrs.count("beta")) a.beta = floatAttr(attrs, "beta", "softplus");
  if (attrs.count("threshold")) a.threshold = floatAttr(attrs, "threshold", "softplus");
  return a;
}

/// softplus(x) as torch.nn.functional.softplus, in f32 or f64 (b.dtype): x
/// where x beta > threshold, else log1p(exp(x beta)) / beta. log1p keeps
/// the relative accuracy of exp's tiny values for large negative x (log(1
/// + exp) would round them away); in f32 it is 0 where exp is, below x beta
/// = -87.34.
template <class B>
typename B::V softplus(B& b, typename B::V x, const SoftplusAttrs& a) {
  using V = typename B::V;
  const bool f64 = b.dtype == DType::f64;
  V z = b.mul(x, b.c(a.beta));
  V e = f64 ? exp64(b, z) : exp(b, z);
  V y = b.div(f64 ? log1p64(b, e) : log1p(b, e), b.c(a.beta));
  return b.select(b.gt(z, b.c(a.threshold)), x, y);
}

/// pow(x, y) of f32s: pow64 on the exact f64 values, rounded once (within
/// 0.5 ulp plus 2^-20 ulp; subnormal f32 results are exact f64 normals
/// before that rounding).
template <class B>
typename B::V pow(B& b, typename B::V x, typename B::V y) {
  typename B::V xd = b.convert(x, DType::f64), yd = b.convert(y, DType::f64);
  return b.convert(inF64(b, [&] { return pow64(b, xd, yd); }), DType::f32);
}

/// pow of i32 or i64 as PyTorch computes it (ATen's powi): for y >= 0, by
/// repeated squaring over y's bits (unrolled: formulas have no loops), the
/// multiplications wrapping, 0^0 = 1; for y < 0, 1 where x = 1, -1 or 1 by
/// y's parity where x = -1, else 0. (PyTorch's frontend rejects a negative
/// integer scalar exponent; kiln's does too, frontend/ops.cpp.)
template <class B>
typename B::V intPow(B& b, typename B::V x, typename B::V y) {
  using V = typename B::V;
  const V zero = b.c(0.0), one = b.c(1.0), minusOne = b.c(-1.0);
  const int bits = b.dtype == DType::i64 ? 63 : 31;  // of a y >= 0
  V result = one, base = x, e = y;
  for (int i = 0; i < bits; ++i) {
    result = b.select(b.ne(b.band(e, one), zero), b.mul(result, base), result);
    if (i + 1 == bits) break;
    base = b.mul(base, base);
    e = b.lshr(e, 1);
  }
  V parity = b.select(b.ne(b.band(y, one), zero), minusOne, one);
  V negative = b.select(b.eq(x, one), one, b.select(b.eq(x, minusOne), parity, zero));
  return b.select(b.lt(y, zero), negative, result);
}

/// `x`, a value of compute dtype computeDType(dtype), rounded to `dtype`:
/// the identity except for f16 and bf16, which round an f32 to nearest even.
template <class B>
typename B::V roundTo(B& b, typename B::V x, DType dtype) {
  switch (dtype) {
    case DType::f16: return roundF16(b, x);
    case DType::bf16: return roundBf16(b, x);
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  return x;
}

/// A constant of compute dtype `t` (not rounded): `value` in the form
/// constantValue() gives it, an int made exactly (Note [Integer constants
/// are exact]), a double converted as `cast` converts an f64.
template <class B>
typename B::V constantIn(B& b, const Number& value, DType t) {
  const Number v = constantValue(value, t);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return b.intConstant(*i, t);
  return b.constant(std::get<double>(v), t);
}

/// A constant of `dtype`: an int converted as `cast` converts an i64, a
/// float as it converts an f64.
template <class B>
typename B::V emitConstant(B& b, const Number& value, DType dtype) {
  return roundTo(b, constantIn(b, value, computeDType(dtype)), dtype);
}

namespace detail {
/// The op's formula on values of compute dtype b.dtype; not yet rounded.
template <class B>
typename B::V emitOp(B& b, Op op, DType outType, std::span<const typename B::V> in, const Attributes& attrs) {
  const bool f64 = b.dtype == DType::f64;
  switch (op) {
    case Op::constant: return constantIn(b, numberAttr(attrs, "value", "constant"), b.dtype);
    case Op::add: return b.add(in[0], in[1]);
    case Op::sub: return b.sub(in[0], in[1]);
    case Op::mul: return b.mul(in[0], in[1]);
    case Op::div: return b.div(in[0], in[1]);
    case Op::maximum: return maximum(b, in[0], in[1]);
    case Op::minimum: return minimum(b, in[0], in[1]);
    case Op::pow:
      if (b.dtype == DType::i32 || b.dtype == DType::i64) return intPow(b, in[0], in[1]);
      return f64 ? pow64(b, in[0], in[1]) : pow(b, in[0], in[1]);
    case Op::neg: return b.neg(in[0]);
    // relu(NaN) is NaN and relu(-0) is -0, as in PyTorch (tests/reference):
    // an ordered < gives both in one compare.
    case Op::relu: return b.select(b.lt(in[0], b.c(0.0)), b.c(0.0), in[0]);
    case Op::exp: return f64 ? exp64(b, in[0]) : exp(b, in[0]);
    case Op::log: return f64 ? log64(b, in[0]) : log(b, in[0]);
    case Op::sqrt: return b.sqrt(in[0]);
    case Op::tanh: return f64 ? tanh64(b, in[0]) : tanh(b, in[0]);
    case Op::sigmoid: return f64 ? sigmoid64(b, in[0]) : sigmoid(b, in[0]);
    case Op::abs: return absolute(b, in[0]);
    case Op::rsqrt: return f64 ? rsqrt64(b, in[0]) : rsqrt(b, in[0]);
    case Op::sin: return f64 ? sinCos64(b, in[0], false) : sinCos(b, in[0], false);
    case Op::cos: return f64 ? sinCos64(b, in[0], true) : sinCos(b, in[0], true);
    case Op::erf: return f64 ? erf64(b, in[0]) : erf(b, in[0]);
    case Op::silu: return f64 ? silu64(b, in[0]) : silu(b, in[0]);
    case Op::gelu:
      if (geluApproximate(attrs) == 1) return f64 ? geluTanh64(b, in[0]) : geluTanh(b, in[0]);
      return f64 ? geluErf64(b, in[0]) : geluErf(b, in[0]);
    case Op::softplus: return softplus(b, in[0], softplusAttrs(attrs));
    case Op::cast: return b.convert(in[0], computeDType(outType));
    // in[0]; `after` is read into a select whose condition (after < after)
    // is false for every value, NaN included, so compilers fold it away and
    // the C renderers declare no unused variable.
    case Op::opt_barrier: return b.select(b.lt(in[1], in[1]), in[1], in[0]);
    case Op::eq: return b.fromM(b.eq(in[0], in[1]));
    case Op::ne: return b.fromM(b.ne(in[0], in[1]));
    case Op::lt: return b.fromM(b.lt(in[0], in[1]));
    case Op::le: return b.fromM(b.le(in[0], in[1]));
    case Op::gt: return b.fromM(b.gt(in[0], in[1]));
    case Op::ge: return b.fromM(b.ge(in[0], in[1]));
    case Op::where: return b.select(b.toM(in[0]), in[1], in[2]);
    // in[3] is the element's index (ir::usesElementIndex).
    case Op::dropout: return dropout(b, in[0], in[1], in[2], in[3], dropoutP(attrs));
    case Op::rand: return randElement(b, in[0], in[1], in[2], outType);
    case Op::randn: return randnElement(b, in[0], in[1], in[2], outType);
    case Op::reshape:
    case Op::transpose:
    case Op::slice:
    case Op::expand:
    case Op::cat:
    case Op::sum:
    case Op::mean:
    case Op::amax:
    case Op::amin:
    case Op::argmax:
    case Op::var:
    case Op::matmul:
    case Op::index_select:
    case Op::index_add:
    case Op::attention:
    case Op::attention_backward:
    case Op::conv2d:
    case Op::conv_transpose2d:
    case Op::conv2d_backward_weight:
    case Op::all_reduce:
    case Op::fusion: break;
  }
  KILN_ASSERT(false, "op {} has no scalar formula", opName(op));
  return in[0];
}
}  // namespace detail

/// The scalar formula of elementwise op `op` on `in` (one value per input,
/// of the compute dtypes of `inTypes`, then for an op that reads the
/// element's index (ir::usesElementIndex) that index, an i64), with result
/// dtype `outType` (what ir::inferType gives) and `attrs` the node's
/// attributes. The result is in
/// the compute dtype of `outType`, rounded to `outType`.
template <class B>
typename B::V emitScalar(B& b, Op op, std::span<const DType> inTypes, DType outType, std::span<const typename B::V> in,
                         const Attributes& attrs) {
  KILN_ASSERT(inTypes.size() == in.size(), "{}: {} dtypes for {} operands", opName(op), inTypes.size(), in.size());
  KILN_ASSERT(
      !usesElementIndex(op) || (in.size() == static_cast<size_t>(opInfo(op).arity) + 1 && inTypes.back() == DType::i64),
      "{}: expected its inputs and the element's i64 index, got {} operands", opName(op), in.size());
  // The dtype the formula computes in: its operands' (`where`: its values').
  const DType operand = op == Op::where ? inTypes[1] : inTypes.empty() ? outType : inTypes[0];
  b.dtype = computeDType(operand);
  return roundTo(b, detail::emitOp(b, op, outType, in, attrs), outType);
}

/// What emitScalar(b, Op::dropout, ...) computes for x (dtype `type`, also
/// the result's) at an element whose draw bits are `bits` (an i64 holding
/// the 32-bit word, ir/scalar_formulas_random.h): for renderers that draw a
/// group of four elements' Philox block once (Note [Dropout draws]).
template <class B>
typename B::V emitDropoutOfBits(B& b, DType type, typename B::V x, typename B::V bits, const Attributes& attrs) {
  b.dtype = computeDType(type);
  return roundTo(b, dropoutOfBits(b, x, bits, dropoutP(attrs)), type);
}

/// The value a kernel computes with for `raw`, an element of `dtype` as
/// loaded from memory: f16 and bf16 arrive as their bits in an i32 (zero
/// extended) and widen to f32; the other dtypes are already their value.
template <class B>
typename B::V loadValue(B& b, typename B::V raw, DType dtype) {
  switch (dtype) {
    case DType::f16: return widenF16(b, raw);
    case DType::bf16: return widenBf16(b, raw);
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  return raw;
}

/// What a kernel stores for value `x` of `dtype`: for f16 and bf16 the bits
/// in the low half of an i32 (x is already rounded, so this is exact).
template <class B>
typename B::V storeValue(B& b, typename B::V x, DType dtype) {
  switch (dtype) {
    case DType::f16: return narrowF16(b, x);
    case DType::bf16: return narrowBf16(b, x);
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  return x;
}

}  // namespace kiln::ir::formulas
