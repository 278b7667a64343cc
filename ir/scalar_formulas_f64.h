// The f64 transcendentals of the scalar formulas: exp, log, tanh and sigmoid
// for f64 values, with the same rules as the f32 ones in
// ir/scalar_formulas.h (built from the builder's +, -, *, /, rint, compares,
// selects and exponent bit tricks; no libm, no FMA), accurate to f64. The
// approximations are Cephes' double-precision ones (Moshier, netlib cephes
// "double/exp.c", "log.c", "tanh.c"): rational functions after an argument
// reduction.
//
// Accuracy, measured by tests/unit/ir/scalar_formulas_f64_test.cpp against
// the long double libm over sweeps of the whole range: exp and log within
// 2 ulp, tanh and sigmoid within 4 ulp. Unlike the f32 exp, the f64 exp
// keeps subnormal results: it is 0 only below x = -745.14 (where e^x rounds
// to 0) and inf above ln(DBL_MAX) = 709.78.
#pragma once

#include <cmath>

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
  V p = b.c(1.01875663804580931796e-4);
  p = b.add(b.mul(p, f), b.c(4.97494994976747001425e-1));
  p = b.add(b.mul(p, f), b.c(4.70579119878881725854e0));
  p = b.add(b.mul(p, f), b.c(1.44989225341610930846e1));
  p = b.add(b.mul(p, f), b.c(1.79368678507819816313e1));
  p = b.add(b.mul(p, f), b.c(7.70838733755885391666e0));
  V q = b.add(f, b.c(1.12873587189167450590e1));
  q = b.add(b.mul(q, f), b.c(4.52279145837532221105e1));
  q = b.add(b.mul(q, f), b.c(8.29875266912776603211e1));
  q = b.add(b.mul(q, f), b.c(7.11544750618563894466e1));
  q = b.add(b.mul(q, f), b.c(2.31251620126765340583e1));
  V y = b.mul(f, b.div(b.mul(z, p), q));
  y = b.sub(y, b.mul(e, b.c(2.121944400546905827679e-4)));
  y = b.sub(y, b.mul(z, b.c(0.5)));
  V r = b.add(b.add(f, y), b.mul(e, b.c(0.693359375)));
  // Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, NaN stays.
  r = b.select(b.lt(x, b.c(0.0)), b.c(NAN), r);
  r = b.select(b.orM(b.lt(x, b.c(0.0)), b.gt(x, b.c(0.0))), r, b.c(-INFINITY));
  r = b.select(b.gt(x, b.c(1.7976931348623157e308)), b.c(INFINITY), r);
  return b.select(b.isNan(x), x, r);
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

}  // namespace kiln::ir::formulas
