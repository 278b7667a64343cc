// The scalar formula of every elementwise op, written once (DESIGN.md §3).
//
// Note [Eager equals compiled]
// Every renderer (LLVM IR for the CPU, CUDA C for NVRTC) and the C++
// evaluator used by constant folding and tests instantiate emitScalar() with
// their own builder, so each op means the same sequence of IEEE operations
// everywhere. Transcendentals (exp, log, tanh, sigmoid) are polynomials built
// from +, -, *, /, rint, sqrt, compares, selects and exponent bit tricks, never
// a libm or device-library call: libm differs between the host and the GPU
// and between scalar and vector code, a polynomial does not. No operation is
// contracted into an FMA (LLVM emits plain fmul/fadd, NVRTC gets
// --fmad=false, C++ is built with -ffp-contract=off). So an elementwise
// chain gives the same bits eager or fused, on the CPU, on CUDA and folded.
//
// Accuracy (f32, measured by tests/unit/ir/scalar_formulas_test.cpp against
// the f64 libm): exp, log ≤ 2 ulp; tanh, sigmoid ≤ 4 ulp away from zero
// crossings; sqrt, +, -, *, / exact. exp(x) is 0 below x = -87.34 (about
// 2^-126) and may be a denormal of reduced accuracy just above it.
//
// A builder B provides:
//   using V = ...;  // a scalar of the compute dtype
//   using M = ...;  // a predicate
//   V c(double);                       constant
//   V add(V,V), sub(V,V), mul(V,V), div(V,V), neg(V), sqrt(V), rint(V)
//                                      IEEE ops; rint rounds half to even
//   M lt(V,V), gt(V,V), le(V,V), isNan(V), orM(M,M)   ordered compares
//   V select(M, V a, V b)              a where the predicate holds, else b
//   V pow2(V n)                        2^n for integer-valued n in [-126, 127]
//   V mantissa(V x), exponent(V x)     x = mantissa * 2^exponent, mantissa in
//                                      [0.5, 1), for finite normal x > 0
#pragma once

#include <cmath>
#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "runtime/error.h"

namespace kiln::ir::formulas {

/// max(a, b) that propagates NaN from either side, like torch.maximum.
template <class B>
typename B::V maximum(B& b, typename B::V x, typename B::V y) {
  return b.select(b.orM(b.gt(x, y), b.isNan(x)), x, y);
}

template <class B>
typename B::V minimum(B& b, typename B::V x, typename B::V y) {
  return b.select(b.orM(b.lt(x, y), b.isNan(x)), x, y);
}

/// exp(x): Cody-Waite reduction x = n ln2 + r and a degree-6 polynomial
/// (Cephes expf coefficients), scaled by 2^n built from exponent bits.
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

/// log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-9 polynomial in
/// m - 1 (Cephes logf coefficients); denormals are scaled up first.
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
  V p = b.c(7.0376836292E-2);
  p = b.add(b.mul(p, f), b.c(-1.1514610310E-1));
  p = b.add(b.mul(p, f), b.c(1.1676998740E-1));
  p = b.add(b.mul(p, f), b.c(-1.2420140846E-1));
  p = b.add(b.mul(p, f), b.c(1.4249322787E-1));
  p = b.add(b.mul(p, f), b.c(-1.6668057665E-1));
  p = b.add(b.mul(p, f), b.c(2.0000714765E-1));
  p = b.add(b.mul(p, f), b.c(-2.4999993993E-1));
  p = b.add(b.mul(p, f), b.c(3.3333331174E-1));
  V y = b.mul(b.mul(p, f), z);
  y = b.add(y, b.mul(e, b.c(-2.12194440e-4)));
  y = b.sub(y, b.mul(z, b.c(0.5)));
  V r = b.add(b.add(f, y), b.mul(e, b.c(0.693359375)));
  // Special values: log(0) = -inf, log(x<0) = NaN, log(inf) = inf, NaN stays.
  r = b.select(b.lt(x, b.c(0.0)), b.c(NAN), r);
  r = b.select(b.orM(b.lt(x, b.c(0.0)), b.gt(x, b.c(0.0))), r, b.c(-INFINITY));
  r = b.select(b.gt(x, b.c(3.40282347e+38)), b.c(INFINITY), r);
  return b.select(b.isNan(x), x, r);
}

/// tanh(x): an odd polynomial for |x| < 0.625 (Cephes tanhf), else
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

/// sigmoid(x) = 1 / (1 + exp(-x)).
template <class B>
typename B::V sigmoid(B& b, typename B::V x) {
  return b.div(b.c(1.0), b.add(b.c(1.0), exp(b, b.neg(x))));
}

/// The scalar formula of elementwise op `op` on `in` (one value per input),
/// with `attrs` the node's attributes. Only f32 formulas exist so far; the
/// frontend and the verifier keep other dtypes away from here.
template <class B>
typename B::V emitScalar(B& b, Op op, std::span<const typename B::V> in, const Attributes& attrs) {
  switch (op) {
    case Op::constant: return b.c(floatAttr(attrs, "value", "constant"));
    case Op::add: return b.add(in[0], in[1]);
    case Op::sub: return b.sub(in[0], in[1]);
    case Op::mul: return b.mul(in[0], in[1]);
    case Op::div: return b.div(in[0], in[1]);
    case Op::maximum: return maximum(b, in[0], in[1]);
    case Op::minimum: return minimum(b, in[0], in[1]);
    case Op::neg: return b.neg(in[0]);
    // relu(NaN) is NaN and relu(-0) is +0; an ordered <= gives both in one compare.
    case Op::relu: return b.select(b.le(in[0], b.c(0.0)), b.c(0.0), in[0]);
    case Op::exp: return exp(b, in[0]);
    case Op::log: return log(b, in[0]);
    case Op::sqrt: return b.sqrt(in[0]);
    case Op::tanh: return tanh(b, in[0]);
    case Op::sigmoid: return sigmoid(b, in[0]);
    case Op::reshape:
    case Op::transpose:
    case Op::fusion: break;
  }
  KILN_ASSERT(false, "op {} has no scalar formula", opName(op));
  return in[0];
}

}  // namespace kiln::ir::formulas
