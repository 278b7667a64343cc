// The f64 formulas of ir/scalar_formulas.h: exp, log, tanh, sigmoid, rsqrt,
// sin, cos, erf, silu, gelu and pow for f64 values, with the same rules as
// the f32 ones (built from the builder's +, -, *, /, rint, compares, selects
// and exponent bit tricks; no libm, no FMA), accurate to f64. exp, log, tanh
// and erf are Cephes' double-precision approximations (Moshier, netlib
// cephes "double/exp.c", "log.c", "tanh.c", "ndtr.c"): rational functions
// after an argument reduction; sin and cos are Cephes' sin.c polynomials
// after a Cody-Waite reduction of our own; pow is exp(y log x) carried in
// double-double arithmetic (the DD helpers below), with fdlibm's exp kernel.
// Some f32 formulas compute in f64 with these (sin, cos, rsqrt, pow): the
// f32 result is then the f64 one rounded once.
//
// Accuracy, measured by tests/unit/ir/scalar_formulas_f64_test.cpp (exp,
// log, tanh, sigmoid), scalar_formulas_math_test.cpp and
// scalar_formulas_pow_test.cpp against the long double libm over sweeps of
// the whole range: exp and log within 2 ulp, tanh and sigmoid within 4 ulp;
// rsqrt within 1.5 ulp (1 / sqrt(x) rounds twice, as PyTorch's); sin and cos
// within 1 ulp for |x| < 2^47 (beyond, see sinCos64); pow within 1 ulp; erf
// within 2 ulp, silu within 3, gelu within 12 (its tanh form within 8 +
// 8|u| ulp, u its tanh's argument), softplus within 2 (its log1p is
// log1pWith below). Unlike the f32 exp, the f64 exp
// keeps subnormal results: it is 0 only below x = -745.14 (where e^x rounds
// to 0) and inf above ln(DBL_MAX) = 709.78.
#pragma once

#include <cmath>

#include "runtime/dtype.h"

namespace kiln::ir::formulas {

/// exp(x) in f64: x = n ln2 + r with ln2 split in two (n C1 is exact), then
/// e^r = 1 + 2 r P(r²) / (Q(r²) - r P(r²)) (Cephes exp.c), scaled by 2^n in
/// two steps so that subnormal and near-overflow results come out right.
template <class B>
typename B::V exp64(B& b, typename B::V x) {
  using V = typename B::V;
  const V hi = b.c(7.09782712893383973096e2), lo = b.c(-7.45133219101941108420e2);
  V xc = b.select(b.gt(x, hi), hi, b.select(b.lt(x, lo), lo, x));
  V n = b.rint(b.mul(xc, b.c(1.4426950408889634073599)));
  V r = b.sub(b.sub(xc, b.mul(n, b.c(6.93145751953125e-1))), b.mul(n, b.c(1.42860682030941723212e-6)));
  V rr = b.mul(r, r);
  V p = b.c(1.26177193074810590878e-4);
  p = b.add(b.mul(p, rr), b.c(3.02994407707441961300e-2));
  p = b.add(b.mul(p, rr), b.c(9.99999999999999999910e-1));
  p = b.mul(p, r);
  V q = b.c(3.00198505138664455042e-6);
  q = b.add(b.mul(q, rr), b.c(2.52448340349684104192e-3));
  q = b.add(b.mul(q, rr), b.c(2.27265548208155028766e-1));
  q = b.add(b.mul(q, rr), b.c(2.00000000000000000009e0));
  V y = b.add(b.c(1.0), b.mul(b.c(2.0), b.div(p, b.sub(q, p))));
  // n is in [-1075, 1024]; each half is in the normal exponent range.
  V half = b.rint(b.mul(n, b.c(0.5)));
  y = b.mul(b.mul(y, b.pow2(half)), b.pow2(b.sub(n, half)));
  y = b.select(b.gt(x, hi), b.c(INFINITY), y);
  y = b.select(b.lt(x, lo), b.c(0.0), y);
  return b.select(b.isNan(x), x, y);
}

/// f z P(f)/Q(f) with z = f², the rational part of Cephes log.c's
/// log(1 + f) = f - z/2 + f z P(f)/Q(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1).
template <class B>
typename B::V logRatio64(B& b, typename B::V f, typename B::V z) {
  using V = typename B::V;
  V p = b.c(1.01875663804580931796e-4);
  for (double k : {4.97494994976747001425e-1, 4.70579119878881725854e0, 1.44989225341610930846e1,
                   1.79368678507819816313e1, 7.70838733755885391666e0})
    p = b.add(b.mul(p, f), b.c(k));
  V q = b.add(f, b.c(1.12873587189167450590e1));
  for (double k :
       {4.52279145837532221105e1, 8.29875266912776603211e1, 7.11544750618563894466e1, 2.31251620126765340583e1})
    q = b.add(b.mul(q, f), b.c(k));
  return b.mul(f, b.div(b.mul(z, p), q));
}

/// log(x) in f64: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
/// log(1+f) = f - f²/2 + f³ P(f)/Q(f) (Cephes log.c), plus e ln2 with ln2
/// split in two; subnormal inputs are scaled by 2^54 first.
template <class B>
typename B::V log64(B& b, typename B::V x) {
  using V = typename B::V;
  auto isTiny = b.lt(x, b.c(2.2250738585072013831e-308));          // DBL_MIN
  V xs = b.select(isTiny, b.mul(x, b.c(18014398509481984.0)), x);  // * 2^54
  V pos = b.select(b.gt(xs, b.c(0.0)), xs, b.c(1.0));              // keep the math finite
  pos = b.select(b.lt(pos, b.c(INFINITY)), pos, b.c(1.0));
  V m = b.mantissa(pos);
  V e = b.sub(b.exponent(pos), b.select(isTiny, b.c(54.0), b.c(0.0)));
  auto small = b.lt(m, b.c(0.70710678118654752440));
  e = b.select(small, b.sub(e, b.c(1.0)), e);
  V f = b.select(small, b.sub(b.add(m, m), b.c(1.0)), b.sub(m, b.c(1.0)));
  V z = b.mul(f, f);
  V y = logRatio64(b, f, z);
  y = b.sub(y, b.mul(e, b.c(2.121944400546905827679e-4)));
  y = b.sub(y, b.mul(z, b.c(0.5)));
  V r = b.add(b.add(f, y), b.mul(e, b.c(0.693359375)));
  // Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, NaN stays.
  r = b.select(b.lt(x, b.c(0.0)), b.c(NAN), r);
  r = b.select(b.orM(b.lt(x, b.c(0.0)), b.gt(x, b.c(0.0))), r, b.c(-INFINITY));
  r = b.select(b.gt(x, b.c(1.7976931348623157e308)), b.c(INFINITY), r);
  return b.select(b.isNan(x), x, r);
}

/// log(1 + x) for x >= 0 (or NaN) in b.dtype, f32 or f64, from
/// `nearZero(f)`, log(1 + f) for f in [0, sqrt(2) - 1) without rounding
/// 1 + f, and `logOf(u)`: below sqrt(2) - 1 nearZero(x), above log(u) for
/// u = 1 + x rounded, plus the rounding error of that sum (exact, by
/// Fast2Sum) divided by u, as fdlibm's log1p corrects. (softplus needs no
/// negative x, and no test measures one.)
template <class B, class Near, class Log>
typename B::V log1pWith(B& b, typename B::V x, Near nearZero, Log logOf) {
  using V = typename B::V;
  V u = b.add(b.c(1.0), x);
  auto near = b.lt(x, b.c(0.41421356237309505));
  V small = nearZero(b.select(near, x, b.c(0.0)));
  V error = b.select(b.ge(x, b.c(1.0)), b.sub(b.c(1.0), b.sub(u, x)), b.sub(x, b.sub(u, b.c(1.0))));
  V big = b.add(logOf(u), b.select(b.lt(u, b.c(INFINITY)), b.div(error, u), b.c(0.0)));
  return b.select(near, small, big);
}

/// log(1 + x) in f64 for x >= 0 (log1pWith with Cephes log.c's rational function).
template <class B>
typename B::V log1p64(B& b, typename B::V x) {
  auto nearZero = [&](typename B::V f) {
    typename B::V z = b.mul(f, f);
    return b.add(f, b.sub(logRatio64(b, f, z), b.mul(z, b.c(0.5))));
  };
  return log1pWith(b, x, nearZero, [&](typename B::V u) { return log64(b, u); });
}

/// tanh(x) in f64: x + x z P(z)/Q(z) with z = x² for |x| < 0.625 (Cephes
/// tanh.c), else sign(x) (1 - 2 / (exp(2|x|) + 1)).
template <class B>
typename B::V tanh64(B& b, typename B::V x) {
  using V = typename B::V;
  auto negative = b.lt(x, b.c(0.0));
  V ax = b.select(negative, b.neg(x), x);
  V z = b.mul(x, x);
  V p = b.c(-9.64399179425052238628e-1);
  p = b.add(b.mul(p, z), b.c(-9.92877231001918586564e1));
  p = b.add(b.mul(p, z), b.c(-1.61468768441708447952e3));
  V q = b.add(z, b.c(1.12811678491632931402e2));
  q = b.add(b.mul(q, z), b.c(2.23548839060100448583e3));
  q = b.add(b.mul(q, z), b.c(4.84406305325125486048e3));
  V small = b.add(x, b.mul(x, b.div(b.mul(z, p), q)));
  // tanh(-0) = -0: the sum above turns -0 into +0, so zeros pass through.
  small = b.select(b.orM(negative, b.gt(x, b.c(0.0))), small, x);
  V big = b.sub(b.c(1.0), b.div(b.c(2.0), b.add(exp64(b, b.add(ax, ax)), b.c(1.0))));
  big = b.select(negative, b.neg(big), big);
  return b.select(b.lt(ax, b.c(0.625)), small, big);
}

/// sigmoid(x) = 1 / (1 + exp(-x)), in f64.
template <class B>
typename B::V sigmoid64(B& b, typename B::V x) {
  return b.div(b.c(1.0), b.add(b.c(1.0), exp64(b, b.neg(x))));
}

/// 1/sqrt(x) in f64: two correctly rounded operations, so within 1 ulp.
/// rsqrt(+-0) = +-inf, rsqrt(inf) = 0, negative x gives NaN.
template <class B>
typename B::V rsqrt64(B& b, typename B::V x) {
  return b.div(b.c(1.0), b.sqrt(x));
}

/// silu(x) = x / (1 + exp(-x)), in f64 (one division: x * sigmoid(x) would
/// round twice). silu(-inf) is NaN (-inf / inf), as in PyTorch.
template <class B>
typename B::V silu64(B& b, typename B::V x) {
  return b.div(x, b.add(b.c(1.0), exp64(b, b.neg(x))));
}

// ---------------------------------------------------------------------------
// Double-double arithmetic: a value carried as the unevaluated sum hi + lo of
// two floats of the builder's dtype (about 106 bits in f64), from the
// error-free transformations that need no FMA: TwoSum (Knuth), Fast2Sum
// (Dekker), Veltkamp's split and Dekker's TwoProduct (see Muller et al.,
// Handbook of Floating-Point Arithmetic, ch. 4). Each is a fixed sequence of
// IEEE operations, so every renderer computes the same bits; none survives
// reassociation or FMA contraction, which no renderer does (Note [Eager
// equals compiled]).

template <class B>
struct DD {
  typename B::V hi, lo;
};

/// s + e = x + y exactly (TwoSum), whenever x + y does not overflow.
template <class B>
DD<B> twoSum(B& b, typename B::V x, typename B::V y) {
  using V = typename B::V;
  V s = b.add(x, y);
  V yy = b.sub(s, x);
  return {s, b.add(b.sub(x, b.sub(s, yy)), b.sub(y, yy))};
}

/// s + e = x + y exactly when |x| >= |y| or x = 0 (Fast2Sum).
template <class B>
DD<B> fastTwoSum(B& b, typename B::V x, typename B::V y) {
  typename B::V s = b.add(x, y);
  return {s, b.sub(y, b.sub(s, x))};
}

/// x = hi + lo with halves of at most 26 (f64) or 12 (f32) significant bits
/// (Veltkamp's split), for |x| below 2^995 (f64) or 2^115 (f32).
template <class B>
DD<B> split(B& b, typename B::V x) {
  using V = typename B::V;
  V c = b.mul(b.c(b.dtype == DType::f64 ? 134217729.0 : 4097.0), x);  // 2^27 + 1, 2^12 + 1
  V hi = b.sub(c, b.sub(c, x));
  return {hi, b.sub(x, hi)};
}

/// p + e = x * y exactly (Dekker's TwoProduct), unless it overflows or e
/// would be below the smallest normal.
template <class B>
DD<B> twoProd(B& b, typename B::V x, typename B::V y) {
  using V = typename B::V;
  V p = b.mul(x, y);
  DD<B> xs = split(b, x), ys = split(b, y);
  V e = b.sub(b.mul(xs.hi, ys.hi), p);
  e = b.add(e, b.mul(xs.hi, ys.lo));
  e = b.add(e, b.mul(xs.lo, ys.hi));
  return {p, b.add(e, b.mul(xs.lo, ys.lo))};
}

/// x + y, about 2^-104 relative (the "accurate" addition of the QD library).
template <class B>
DD<B> ddAdd(B& b, DD<B> x, DD<B> y) {
  DD<B> s = twoSum(b, x.hi, y.hi), t = twoSum(b, x.lo, y.lo);
  s = fastTwoSum(b, s.hi, b.add(s.lo, t.hi));
  return fastTwoSum(b, s.hi, b.add(s.lo, t.lo));
}

/// x * y, about 2^-102 relative.
template <class B>
DD<B> ddMul(B& b, DD<B> x, DD<B> y) {
  DD<B> p = twoProd(b, x.hi, y.hi);
  return fastTwoSum(b, p.hi, b.add(p.lo, b.add(b.mul(x.hi, y.lo), b.mul(x.lo, y.hi))));
}

/// x * y for a plain y.
template <class B>
DD<B> ddMul(B& b, DD<B> x, typename B::V y) {
  DD<B> p = twoProd(b, x.hi, y);
  return fastTwoSum(b, p.hi, b.add(p.lo, b.mul(x.lo, y)));
}

/// Whether the sign bit of x (of compute dtype b.dtype, f32 or f64) is set:
/// true for -0 and -NaN, which compare false with `x < 0`.
template <class B>
typename B::M signBit(B& b, typename B::V x) {
  const DType bits = b.dtype == DType::f64 ? DType::i64 : DType::i32;
  return b.lt(b.bitcast(x, bits), b.constant(0.0, bits));
}

// ---------------------------------------------------------------------------
// sin and cos.

/// sin(h + l) for |h| <= pi/4 (a little beyond is fine), |l| <= ulp(h):
/// Cephes sin.c's polynomial in h, plus l's first-order term l cos(h).
template <class B>
typename B::V sinKernel64(B& b, typename B::V h, typename B::V l) {
  using V = typename B::V;
  V z = b.mul(h, h);
  V p = b.c(1.58962301576546568060E-10);
  p = b.add(b.mul(p, z), b.c(-2.50507477628578072866E-8));
  p = b.add(b.mul(p, z), b.c(2.75573136213857245213E-6));
  p = b.add(b.mul(p, z), b.c(-1.98412698295895385996E-4));
  p = b.add(b.mul(p, z), b.c(8.33333333332211858878E-3));
  p = b.add(b.mul(p, z), b.c(-1.66666666666666307295E-1));
  V tail = b.add(b.mul(b.mul(h, z), p), b.mul(l, b.sub(b.c(1.0), b.mul(z, b.c(0.5)))));
  return b.add(h, tail);
}

/// cos(h + l) likewise: Cephes' polynomial, the rounding error of 1 - h²/2
/// added back (as fdlibm's __kernel_cos does), and l's term -l sin(h).
template <class B>
typename B::V cosKernel64(B& b, typename B::V h, typename B::V l) {
  using V = typename B::V;
  V z = b.mul(h, h);
  V p = b.c(-1.13585365213876817300E-11);
  p = b.add(b.mul(p, z), b.c(2.08757008419747316778E-9));
  p = b.add(b.mul(p, z), b.c(-2.75573141792967388112E-7));
  p = b.add(b.mul(p, z), b.c(2.48015872888517045348E-5));
  p = b.add(b.mul(p, z), b.c(-1.38888888888730564116E-3));
  p = b.add(b.mul(p, z), b.c(4.16666666666665929218E-2));
  V hz = b.mul(z, b.c(0.5));
  V w = b.sub(b.c(1.0), hz);                // in [0.69, 1], so 1 - w is exact
  V error = b.sub(b.sub(b.c(1.0), w), hz);  // (1 - hz) - w, exactly
  V tail = b.add(error, b.sub(b.mul(b.mul(z, z), p), b.mul(l, h)));
  return b.add(w, tail);
}

/// sin(h + l + j pi/2), or its cos when `cosine`, for an integer-valued j:
/// quadrant j mod 4 picks sin or cos of h + l and a sign. cos(x) is
/// sin(x + pi/2), one quadrant on.
template <class B>
typename B::V sinCosQuadrant(B& b, typename B::V h, typename B::V l, typename B::V j, bool cosine) {
  using V = typename B::V;
  V q = b.sub(j, b.mul(b.c(4.0), b.rint(b.mul(j, b.c(0.25)))));  // j mod 4, in {-2, ..., 2}
  if (cosine) q = b.add(q, b.c(1.0));
  q = b.select(b.lt(q, b.c(0.0)), b.add(q, b.c(4.0)), q);  // in {0, 1, 2, 3}
  V s = sinKernel64(b, h, l), c = cosKernel64(b, h, l);
  V v = b.select(b.orM(b.eq(q, b.c(1.0)), b.eq(q, b.c(3.0))), c, s);
  return b.select(b.ge(q, b.c(2.0)), b.neg(v), v);
}

/// sin(x) or cos(x) in f64. Cody-Waite reduction x = r + j pi/2 with
/// j = rint(x 2/pi), split as j = jh + jl (jh a multiple of 2^24), and pi/2
/// in four pieces of 29 bits and a fifth rounded one: for |j| < 2^48 each
/// jh or jl times a piece is exact, the subtractions are exact or their
/// errors are kept by TwoSum, and r comes out in double-double within about
/// 2^-118 of x - j pi/2 — enough for the closest doubles to a multiple of
/// pi/2 (|r| near 2^-60). So |x| < 2^47: within 1 ulp. Beyond, the products
/// round and r is off by up to ulp(x) pi/2: a second reduction and a clamp
/// to [-pi/4, pi/4] keep the result in [-1, 1], but it is not sin(x)
/// (PyTorch reduces exactly there; docs/ops.md). inf and NaN give NaN,
/// sin(-0) = -0.
template <class B>
typename B::V sinCos64(B& b, typename B::V x, bool cosine) {
  using V = typename B::V;
  V ax = b.select(b.lt(x, b.c(0.0)), b.neg(x), x);
  V xs = b.select(b.lt(ax, b.c(INFINITY)), x, b.c(0.0));  // inf, NaN: restored at the end
  V j = b.rint(b.mul(xs, b.c(0x1.45f306dc9c883p-1)));     // 2/pi
  V jh = b.mul(b.rint(b.mul(j, b.c(0x1p-24))), b.c(0x1p24));
  V jl = b.sub(j, jh);
  DD<B> s{xs, b.c(0.0)};
  for (double piece : {0x1.921fb54p+0, 0x1.10b4612p-30, -0x1.676733bp-60, 0x1.701b83ap-92}) {
    for (V part : {jh, jl}) {
      DD<B> t = twoSum(b, s.hi, b.neg(b.mul(part, b.c(piece))));
      s = {t.hi, b.add(s.lo, t.lo)};
    }
  }
  s.lo = b.sub(s.lo, b.mul(j, b.c(-0x1.76b7ed8fbbaccp-122)));  // the rest of pi/2
  DD<B> r = fastTwoSum(b, s.hi, s.lo);
  // |x| >= 2^47: reduce r once more and clamp (see above).
  auto big = b.ge(ax, b.c(0x1p47));
  V j2 = b.rint(b.mul(r.hi, b.c(0x1.45f306dc9c883p-1)));
  V hBig = b.sub(r.hi, b.mul(j2, b.c(0x1.921fb54442d18p+0)));
  const V quarter = b.c(0x1.921fb54442d18p-1);
  hBig = b.select(b.gt(hBig, quarter), quarter, b.select(b.lt(hBig, b.neg(quarter)), b.neg(quarter), hBig));
  V h = b.select(big, hBig, r.hi), l = b.select(big, b.c(0.0), r.lo);
  j = b.select(big, b.add(j, j2), j);
  V y = sinCosQuadrant(b, h, l, j, cosine);
  if (!cosine) y = b.select(b.eq(x, b.c(0.0)), x, y);  // sin(+-0) = +-0
  return b.select(b.lt(ax, b.c(INFINITY)), y, b.c(NAN));
}

// ---------------------------------------------------------------------------
// erf and gelu.

/// erf(x) for |x| <= 1: x T(x²) / U(x²) (Cephes ndtr.c), evaluated as
/// x + x (T - U)(x²) / U(x²): the correction is at most 0.16 x, so its
/// rounding errors count a sixth as much as in x T / U.
template <class B>
typename B::V erfSmall64(B& b, typename B::V x) {
  using V = typename B::V;
  V z = b.mul(x, x);
  V d = b.sub(b.c(-23.956740424879797), z);  // T - U, whose z^5 coefficient is -1
  for (double k : {-431.3319300597684, -2362.3184837629583, -15625.674920261044, 6324.907040175902})
    d = b.add(b.mul(d, z), b.c(k));
  V u = b.add(z, b.c(3.35617141647503099647E1));
  for (double k :
       {5.21357949780152679795E2, 4.59432382970980127987E3, 2.26290000613890934246E4, 4.92673942608635921086E4})
    u = b.add(b.mul(u, z), b.c(k));
  return b.add(x, b.mul(x, b.div(d, u)));
}

/// x / sqrt(2) in double-double (of b.dtype, f32 or f64), by TwoProduct
/// with 1/sqrt(2) in two parts; for |x| below 2^995 (f64) or 2^115 (f32).
template <class B>
DD<B> timesSqrtHalf(B& b, typename B::V x) {
  const bool f64 = b.dtype == DType::f64;
  DD<B> p = twoProd(b, x, b.c(f64 ? 0x1.6a09e667f3bcdp-1 : 0x1.6a09e6p-1));
  return {p.hi, b.add(p.lo, b.mul(x, b.c(f64 ? -0x1.bdd3413b26456p-55 : 0x1.9fcef4p-27)))};
}

/// erfc(a + aLow) for a in [1, 28], |aLow| <= ulp(a): exp(-a²) P(a)/Q(a)
/// below 8, R(a)/S(a) above (Cephes ndtr.c), with (a + aLow)² in
/// double-double (TwoProduct) so that exp(-a²) keeps its accuracy:
/// exp(-(h + l)) = exp(-h) (1 - l). (gelu passes x/sqrt 2 with its low
/// part; rounded, it would cost 2a² ulp.) Past 26.6 it is 0.
template <class B>
typename B::V erfcLarge64(B& b, typename B::V a, typename B::V aLow) {
  using V = typename B::V;
  DD<B> a2 = twoProd(b, a, a);
  a2.lo = b.add(a2.lo, b.mul(b.add(a, a), aLow));
  V e = b.mul(exp64(b, b.neg(a2.hi)), b.sub(b.c(1.0), a2.lo));
  V p = b.c(2.46196981473530512524E-10);
  for (double k :
       {5.64189564831068821977E-1, 7.46321056442269912687E0, 4.86371970985681366614E1, 1.96520832956077098242E2,
        5.26445194995477358631E2, 9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2})
    p = b.add(b.mul(p, a), b.c(k));
  V q = b.add(a, b.c(1.32281951154744992508E1));
  for (double k :
       {8.67072140885989742329E1, 3.54937778887819891062E2, 9.75708501743205489753E2, 1.82390916687909736289E3,
        2.24633760818710981792E3, 1.65666309194161350182E3, 5.57535340817727675546E2})
    q = b.add(b.mul(q, a), b.c(k));
  V r = b.c(5.64189583547755073984E-1);
  for (double k : {1.27536670759978104416E0, 5.01905042251180477414E0, 6.16021097993053585195E0,
                   7.40974269950448939160E0, 2.97886665372100240670E0})
    r = b.add(b.mul(r, a), b.c(k));
  V s = b.add(a, b.c(2.26052863220117276590E0));
  for (double k : {9.39603524938001434673E0, 1.20489539808096656605E1, 1.70814450747565897222E1,
                   9.60896809063285878198E0, 3.36907645100081516050E0})
    s = b.add(b.mul(s, a), b.c(k));
  auto tail = b.ge(a, b.c(8.0));
  return b.div(b.mul(e, b.select(tail, r, p)), b.select(tail, s, q));
}

/// erf(x) in f64: erfSmall64 for |x| <= 1, else sign(x) (1 - erfc(|x|)).
template <class B>
typename B::V erf64(B& b, typename B::V x) {
  using V = typename B::V;
  V ax = b.select(b.lt(x, b.c(0.0)), b.neg(x), x);
  auto small = b.le(ax, b.c(1.0));
  V a = b.select(small, b.c(1.0), b.select(b.lt(ax, b.c(28.0)), ax, b.c(28.0)));  // NaN: 28, restored below
  V big = b.sub(b.c(1.0), erfcLarge64(b, a, b.c(0.0)));
  big = b.select(b.lt(x, b.c(0.0)), b.neg(big), big);
  V y = b.select(small, erfSmall64(b, x), big);
  return b.select(b.isNan(x), x, y);
}

/// gelu(x) = x/2 (1 + erf(x/sqrt 2)) in f64. For x < 0 the factor is
/// erfc(|x|/sqrt 2), computed directly rather than as 1 + erf, which would
/// cancel: the left tail keeps its relative accuracy (PyTorch's 1 + erf
/// loses it; the function is the same). gelu(-inf) is NaN, as in PyTorch.
template <class B>
typename B::V geluErf64(B& b, typename B::V x) {
  using V = typename B::V;
  DD<B> z = timesSqrtHalf(b, x);
  auto negative = b.lt(z.hi, b.c(0.0));
  V az = b.select(negative, b.neg(z.hi), z.hi), azLow = b.select(negative, b.neg(z.lo), z.lo);
  auto small = b.le(az, b.c(1.0)), below = b.lt(az, b.c(28.0));  // NaN: neither
  V s = erfSmall64(b, b.select(small, az, b.c(0.0)));            // erf(|z|)
  V c = erfcLarge64(b, b.select(small, b.c(1.0), b.select(below, az, b.c(28.0))),
                    b.select(b.andM(b.notM(small), below), azLow, b.c(0.0)));  // erfc(|z|)
  V up = b.select(small, b.add(b.c(1.0), s), b.sub(b.c(2.0), c));              // 1 + erf(|z|)
  V down = b.select(small, b.sub(b.c(1.0), s), c);                             // 1 - erf(|z|)
  return b.mul(b.mul(x, b.c(0.5)), b.select(b.lt(x, b.c(0.0)), down, up));
}

/// gelu with the tanh approximation, x/2 (1 + tanh(u)) with u = sqrt(2/pi)
/// (x + 0.044715 x³) (PyTorch's inner term), computed as x / (1 + exp(-2u)),
/// the same function without the cancellation of 1 + tanh(u) for x < 0.
template <class B>
typename B::V geluTanh64(B& b, typename B::V x) {
  using V = typename B::V;
  V inner = b.mul(b.c(0.7978845608028654), b.add(x, b.mul(b.c(0.044715), b.mul(b.mul(x, x), x))));
  return b.div(x, b.add(b.c(1.0), exp64(b, b.mul(inner, b.c(-2.0)))));
}

// ---------------------------------------------------------------------------
// pow.

/// log(a) in double-double for a finite a > 0 (subnormals included), within
/// about 2^-100 relative: a = m 2^e with m in [sqrt(1/2), sqrt(2)),
/// log(m) = 2 atanh(s) = 2s (1 + s²/3 + s⁴/5 + ...) with s = (m-1)/(m+1) in
/// double-double (|s| <= 0.172), the first terms of the series in
/// double-double and the rest (through s^18/25) in f64; plus e ln 2 with
/// ln 2 in two parts, the first of 42 bits so that e times it is exact.
template <class B>
DD<B> logDD(B& b, typename B::V a) {
  using V = typename B::V;
  auto tiny = b.lt(a, b.c(2.2250738585072013831e-308));
  V as = b.select(tiny, b.mul(a, b.c(0x1p54)), a);
  V m = b.mantissa(as);
  V e = b.sub(b.exponent(as), b.select(tiny, b.c(54.0), b.c(0.0)));
  auto small = b.lt(m, b.c(0.70710678118654752440));
  m = b.select(small, b.add(m, m), m);
  e = b.select(small, b.sub(e, b.c(1.0)), e);
  V f = b.sub(m, b.c(1.0));  // exact
  // s = f / (2 + f): the quotient, then its error from the exact remainder.
  DD<B> d = fastTwoSum(b, b.c(2.0), f);
  V sh = b.div(f, d.hi);
  DD<B> p = twoProd(b, sh, d.hi);
  V sl = b.div(b.sub(b.sub(b.sub(f, p.hi), p.lo), b.mul(sh, d.lo)), d.hi);
  DD<B> s = fastTwoSum(b, sh, sl);
  DD<B> u = twoProd(b, s.hi, s.hi);  // s²
  u.lo = b.add(u.lo, b.mul(b.add(s.hi, s.hi), s.lo));
  V t = b.c(1.0 / 25);
  for (int k = 23; k >= 7; k -= 2) t = b.add(b.mul(t, u.hi), b.c(1.0 / k));
  DD<B> a5 = ddAdd(b, ddMul(b, u, t), DD<B>{b.c(0x1.999999999999ap-3), b.c(-0x1.999999999999ap-57)});  // 1/5 + ...
  DD<B> a3 = ddAdd(b, ddMul(b, u, a5), DD<B>{b.c(0x1.5555555555555p-2), b.c(0x1.5555555555555p-56)});  // 1/3 + ...
  DD<B> a1 = ddMul(b, u, a3);
  DD<B> series = fastTwoSum(b, b.c(1.0), a1.hi);
  series = fastTwoSum(b, series.hi, b.add(series.lo, a1.lo));
  DD<B> l = ddMul(b, s, series);
  l = {b.add(l.hi, l.hi), b.add(l.lo, l.lo)};
  return ddAdd(b, DD<B>{b.mul(e, b.c(0x1.62e42fefa38p-1)), b.mul(e, b.c(0x1.ef35793c7673p-45))}, l);
}

/// exp(t.hi + t.lo) for a double-double t: n = rint(t / ln2), r = t - n ln2
/// in double-double, then fdlibm's e_exp.c kernel 1 + r + r c/(2 - c) with
/// r's low part added in and one final rounding, scaled by 2^n in two steps. Overflow gives inf and
/// underflow 0 through the scaling (t.hi is clamped to +-760 first, which
/// keeps each step's exponent in range); subnormal results round twice.
template <class B>
typename B::V expDD(B& b, DD<B> t) {
  using V = typename B::V;
  V th = b.select(b.gt(t.hi, b.c(760.0)), b.c(760.0), b.select(b.lt(t.hi, b.c(-760.0)), b.c(-760.0), t.hi));
  V n = b.rint(b.mul(th, b.c(0x1.71547652b82fep+0)));
  V hi = b.sub(th, b.mul(n, b.c(0x1.62e42fefa38p-1)));  // exact
  V lo = b.sub(t.lo, b.mul(n, b.c(0x1.ef35793c7673p-45)));
  V r = b.add(hi, lo);
  V rr = b.mul(r, r);
  V p = b.c(4.13813679705723846039e-08);
  p = b.add(b.mul(p, rr), b.c(-1.65339022054652515390e-06));
  p = b.add(b.mul(p, rr), b.c(6.61375632143793436117e-05));
  p = b.add(b.mul(p, rr), b.c(-2.77777777770155933842e-03));
  p = b.add(b.mul(p, rr), b.c(1.66666666666666019037e-01));
  V c = b.sub(r, b.mul(rr, p));
  // 1 + hi + (lo + r c/(2 - c)), with 1 + hi exact (Fast2Sum), so that the
  // sum rounds once.
  DD<B> one = fastTwoSum(b, b.c(1.0), hi);
  V y = b.add(one.hi, b.add(one.lo, b.add(lo, b.div(b.mul(r, c), b.sub(b.c(2.0), c)))));
  V half = b.rint(b.mul(n, b.c(0.5)));
  return b.mul(b.mul(y, b.pow2(half)), b.pow2(b.sub(n, half)));
}

/// pow(x, y) in f64, with C99's special cases (Annex F.9.4.4): pow(x, +-0)
/// = 1 and pow(1, y) = 1 even for NaN; a negative finite x with a finite
/// non-integer y gives NaN; zeros and infinities of x and y give 0 or inf
/// with the sign of x where y is an odd integer. Otherwise
/// |x|^y = exp(y log|x|) with log and exp in double-double (logDD, expDD),
/// so the result is within 1 ulp (exact where it is representable, such as
/// integer powers of integers), negated for a negative x and an odd y.
/// |y| is clamped to 2^64 first: beyond that every |x| != 1 over- or
/// underflows anyway, and y is an even integer.
template <class B>
typename B::V pow64(B& b, typename B::V x, typename B::V y) {
  using V = typename B::V;
  const V zero = b.c(0.0), one = b.c(1.0), inf = b.c(INFINITY);
  V ax = b.select(b.lt(x, zero), b.neg(x), x);
  V ay = b.select(b.lt(y, zero), b.neg(y), y);
  auto yFinite = b.lt(ay, inf);
  auto yInt = b.andM(yFinite, b.eq(b.rint(y), y));
  V halfY = b.mul(y, b.c(0.5));
  auto yOdd = b.andM(yInt, b.ne(b.rint(halfY), halfY));
  // |x|^y where |x| is finite and nonzero and y finite; other lanes compute
  // with harmless values and are replaced below.
  V a = b.select(b.andM(b.gt(ax, zero), b.lt(ax, inf)), ax, one);
  const V cap = b.c(0x1p64);
  V yc = b.select(b.gt(y, cap), cap, b.select(b.lt(y, b.neg(cap)), b.neg(cap), y));
  yc = b.select(yFinite, yc, zero);
  DD<B> l = logDD(b, a);
  DD<B> t = twoProd(b, yc, l.hi);
  t = fastTwoSum(b, t.hi, b.add(t.lo, b.mul(yc, l.lo)));
  V mag = expDD(b, t);
  auto yNeg = b.lt(y, zero);
  mag = b.select(b.eq(ax, zero), b.select(yNeg, inf, zero), mag);  // pow(+-0, y)
  mag = b.select(b.eq(ax, inf), b.select(yNeg, zero, inf), mag);   // pow(+-inf, y)
  // y = +-inf: 1 at |x| = 1; inf where |x| < 1 and y < 0 or |x| > 1 and y > 0; else 0.
  V toInf = b.select(b.lt(ax, one), b.select(yNeg, inf, zero), b.select(yNeg, zero, inf));
  mag = b.select(yFinite, mag, b.select(b.eq(ax, one), one, toInf));
  V r = b.select(b.andM(signBit(b, x), yOdd), b.neg(mag), mag);
  // NaN for a finite negative x and a finite non-integer y, and from NaN operands.
  auto domain = b.andM(b.andM(b.lt(x, zero), b.lt(ax, inf)), b.andM(yFinite, b.notM(yInt)));
  r = b.select(domain, b.c(NAN), r);
  r = b.select(b.orM(b.isNan(x), b.isNan(y)), b.add(x, y), r);
  return b.select(b.orM(b.eq(y, zero), b.eq(x, one)), one, r);
}

}  // namespace kiln::ir::formulas
