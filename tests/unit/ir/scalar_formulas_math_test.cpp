// abs, rsqrt, sin, cos, erf, silu, gelu and softplus through the C++ evaluator, in f32
// and f64, swept against the long double libm (64-bit mantissa on x86-64)
// and held to the bounds ir/scalar_formulas.h and ir/scalar_formulas_f64.h
// state; then their special values (zeros, infinities, NaN, the ends of
// each formula's range). pow has its own file (scalar_formulas_pow_test.cpp).
//
// Bounds (measured when written, in brackets; f32 | f64):
//   rsqrt  0.5 [0.5: correctly rounded] | 1.5 [1.47: 1/sqrt rounds twice]
//   sin    0.5001 [0.5]                 | 1 [0.75] for |x| < 2^47
//   cos    0.5001 [0.5]                 | 1 [0.74]
//   erf    2 [1.31]                     | 2 [1.64]
//   silu   3 [2.23]                     | 3 [2.06]
//   gelu   8 [7.2]                      | 12 [8.0]    (approximate = 0)
//   softplus 2 [1.53]                  | 2 [1.71]   beta 1 and 2, threshold 20
//   gelu   8 + 8|u| ulp, u = sqrt(2/pi) (x + 0.044715 x³), its tanh's
//          argument (approximate = 1): exp(-2u) turns u's rounding errors
//          into 2|u| times as many ulp of the result where u < 0, and u
//          rounds about 6 times [f32: 150 ulp at x = -8.9, where u = -22.7;
//          f64: 1516 ulp at x = -19.8, where u = -292]
// f32 sin, cos and rsqrt compute in f64 and round once, so their error is
// 0.5 ulp plus at most 2^-20 ulp; 0.5001 leaves room for that and nothing
// more. rsqrt was checked on every positive f32 once, when written; the
// tests below check every 97th and the neighbours of every power of two.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "ir/scalar_eval.h"

namespace kiln::ir {
namespace {

using LD = long double;
constexpr LD kPi = 3.14159265358979323846264338327950288L;

double eval64(Op op, double x, const Attributes& attrs = {}) {
  const double in[] = {x};
  return evalScalar(op, DType::f64, in, attrs);
}
float eval32(Op op, float x, const Attributes& attrs = {}) {
  const float in[] = {x};
  return evalScalarF32(op, in, attrs);
}

/// The spacing of `dtype` values (f32 or f64) around `ref`, subnormal below the smallest normal.
LD ulpAt(LD ref, DType dtype) {
  const bool f64 = dtype == DType::f64;
  const LD a = std::fabs(ref);
  if (a < (f64 ? DBL_MIN : FLT_MIN)) return std::ldexp(1.0L, f64 ? -1074 : -149);
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0L, e - (f64 ? 53 : 24));
}

/// The worst error of `op` in `dtype` against `ref` over the points checked.
struct Sweep {
  std::string name;
  Op op;
  DType dtype;
  LD (*ref)(LD);
  double boundUlp;
  Attributes attrs = {};
  double worst = 0, worstX = 0;
  long points = 0;

  void check(double x) {
    const bool f64 = dtype == DType::f64;
    if (!f64) x = static_cast<float>(x);
    const LD r = ref(x);
    const double got = f64 ? eval64(op, x, attrs) : eval32(op, static_cast<float>(x), attrs);
    ++points;
    if (std::fabs(r) > (f64 ? DBL_MAX : FLT_MAX)) {
      EXPECT_EQ(got, r > 0 ? INFINITY : -INFINITY) << name << "(" << x << ")";
      return;
    }
    const double e = static_cast<double>(std::fabs(static_cast<LD>(got) - r) / ulpAt(r, dtype));
    if (!(e <= worst)) worst = e, worstX = x;  // NaN counts as the worst
  }
  void report() {
    std::printf("[ measured ] %s %s: max %.4f ulp at x = %.17g over %ld points (bound %g)\n", name.c_str(),
                dtypeName(dtype).data(), worst, worstX, points, boundUlp);
    EXPECT_LE(worst, boundUlp) << name << " " << dtypeName(dtype) << " at x = " << worstX;
  }
  void uniform(double lo, double hi, int n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for (int i = 0; i < n; ++i) check(d(rng));
  }
  /// n points log-uniform in [lo, hi] (lo > 0), alternately positive and negative when `bothSigns`.
  void logUniform(double lo, double hi, int n, unsigned seed, bool bothSigns = true) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(std::log(lo), std::log(hi));
    for (int i = 0; i < n; ++i) check((bothSigns && i % 2 ? -1 : 1) * std::exp(d(rng)));
  }
};

constexpr int kPoints = 200000;
constexpr DType kFloats[] = {DType::f32, DType::f64};

LD refRsqrt(LD x) { return 1 / std::sqrt(x); }
LD refSin(LD x) { return std::sin(x); }
LD refCos(LD x) { return std::cos(x); }
LD refErf(LD x) { return std::erf(x); }
LD refSilu(LD x) { return x / (1 + std::exp(-x)); }
LD refGelu(LD x) { return x / 2 * std::erfc(-x / std::sqrt(2.0L)); }
LD refGeluTanh(LD x) { return x / (1 + std::exp(-2 * std::sqrt(2 / kPi) * (x + 0.044715L * x * x * x))); }

TEST(ScalarFormulasMath, Rsqrt) {
  for (DType d : kFloats) {
    const bool f64 = d == DType::f64;
    Sweep s{"rsqrt", Op::rsqrt, d, refRsqrt, f64 ? 1.5 : 0.5};
    s.logUniform(f64 ? 4.9e-324 : 1.4e-45, f64 ? DBL_MAX : FLT_MAX, kPoints, 1, false);
    s.uniform(0.5, 4, kPoints / 2, 2);
    s.report();
  }
}

TEST(ScalarFormulasMath, SinAndCos) {
  for (DType d : kFloats) {
    const bool f64 = d == DType::f64;
    struct Fn {
      const char* name;
      Op op;
      LD (*ref)(LD);
    };
    for (auto [name, op, ref] : {Fn{"sin", Op::sin, refSin}, Fn{"cos", Op::cos, refCos}}) {
      Sweep s{name, op, d, ref, f64 ? 1.0 : 0.5001};
      s.uniform(-10, 10, kPoints, 3);
      s.logUniform(1e-30, 1e4, kPoints / 2, 4);
      s.logUniform(1e4, 1e6, kPoints / 4, 5);
      // Up to 2^47 for f64; for f32 the whole range (its reduction is exact).
      s.logUniform(1e6, f64 ? 0x1p47 : FLT_MAX, kPoints / 2, 6);
      for (double x : {1e4, -1e4, 1e6, -1e6, 1e9, 1e13}) s.check(x);
      if (!f64) {
        for (double x : {1e20, 1e30, 16367173.0 * 0x1p72, static_cast<double>(FLT_MAX)}) s.check(x);
      }
      s.report();
    }
  }
}

TEST(ScalarFormulasMath, SinAndCosF32OnRandomBitPatterns) {
  // Every exponent of f32 alike: the reduction is exact at every magnitude.
  Sweep sin{"sin (bit patterns)", Op::sin, DType::f32, refSin, 0.5001};
  Sweep cos{"cos (bit patterns)", Op::cos, DType::f32, refCos, 0.5001};
  std::mt19937 rng(7);
  for (int i = 0; i < kPoints; ++i) {
    const float x =
        std::bit_cast<float>(static_cast<uint32_t>(rng() & 0xff7fffffu));  // finite: the exponent is never all ones
    sin.check(x);
    cos.check(x);
  }
  sin.report();
  cos.report();
}

TEST(ScalarFormulasMath, SinAndCosF64NearMultiplesOfHalfPi) {
  // The doubles nearest to k pi/2: x - k pi/2 is as small as 2^-60 here,
  // which the reduction must still get to the last bit (|k| < 2^46).
  Sweep sin{"sin (near k pi/2)", Op::sin, DType::f64, refSin, 1.0};
  Sweep cos{"cos (near k pi/2)", Op::cos, DType::f64, refCos, 1.0};
  std::mt19937_64 rng(8);
  for (int i = 0; i < kPoints; ++i) {
    const LD k = std::floor(std::ldexp(static_cast<LD>(rng() >> 11), -53) * std::ldexp(1.0L, 1 + i % 46));
    const double x = static_cast<double>(k * (kPi / 2));
    if (x == 0) continue;
    sin.check(x);
    cos.check(x);
  }
  sin.report();
  cos.report();
}

TEST(ScalarFormulasMath, SinAndCosF64BeyondTheirRangeStayBounded) {
  // |x| >= 2^47: not sin(x) any more (docs/ops.md), but a sine and a cosine
  // of one angle, never NaN.
  for (double x : {0x1p47, 1e15, 1e20, -3e40, 1e300, -DBL_MAX}) {
    const double s = eval64(Op::sin, x), c = eval64(Op::cos, x);
    EXPECT_LE(std::fabs(s), 1.0) << x;
    EXPECT_LE(std::fabs(c), 1.0) << x;
    EXPECT_NEAR(s * s + c * c, 1.0, 1e-15) << x;
  }
}

TEST(ScalarFormulasMath, SinIsOddAndCosEven) {
  for (DType d : kFloats) {
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> u(-40, 40);
    for (int i = 0; i < 20000; ++i) {
      double x = std::ldexp(u(rng), static_cast<int>(rng() % 60) - 20);
      if (d == DType::f32) {
        const float xf = static_cast<float>(x);
        ASSERT_EQ(eval32(Op::sin, -xf), -eval32(Op::sin, xf)) << xf;
        ASSERT_EQ(eval32(Op::cos, -xf), eval32(Op::cos, xf)) << xf;
      } else {
        ASSERT_EQ(eval64(Op::sin, -x), -eval64(Op::sin, x)) << x;
        ASSERT_EQ(eval64(Op::cos, -x), eval64(Op::cos, x)) << x;
      }
    }
  }
}

TEST(ScalarFormulasMath, Erf) {
  for (DType d : kFloats) {
    Sweep s{"erf", Op::erf, d, refErf, 2.0};
    s.uniform(-7, 7, kPoints, 10);
    s.logUniform(1e-30, 7, kPoints / 2, 11);
    s.uniform(0.9, 1.1, kPoints / 4, 12);  // both sides of the switch at |x| = 1
    s.report();
  }
}

TEST(ScalarFormulasMath, Silu) {
  for (DType d : kFloats) {
    const bool f64 = d == DType::f64;
    Sweep s{"silu", Op::silu, d, refSilu, 3.0};
    // f32: exp flushes below -87.3, where silu's tiny results turn to -0 (checked below).
    s.uniform(f64 ? -700 : -85, f64 ? 700 : 85, kPoints, 13);
    s.uniform(-20, 20, kPoints / 2, 14);
    s.logUniform(1e-30, 1, kPoints / 4, 15);
    s.report();
  }
}

TEST(ScalarFormulasMath, GeluExact) {
  for (DType d : kFloats) {
    const bool f64 = d == DType::f64;
    Sweep s{"gelu", Op::gelu, d, refGelu, f64 ? 12.0 : 8.0};
    s.uniform(-8, 8, kPoints, 16);
    s.logUniform(1e-30, 8, kPoints / 4, 17);
    // The left tail, where 1 + erf would cancel: to where the result is subnormal.
    s.uniform(f64 ? -37.5 : -13, -8, kPoints / 4, 18);
    s.uniform(8, 1e6, kPoints / 8, 19);
    s.report();
  }
}

TEST(ScalarFormulasMath, GeluTanh) {
  // Within 8 + 8|u| ulp, u = sqrt(2/pi) (x + 0.044715 x³): exp(-2u) turns
  // u's rounding errors into 2|u| times as many ulp of the result, which
  // matters where u < 0 (for u > 0 the result is x (1 - tiny)).
  const Attributes tanhForm = {{"approximate", int64_t{1}}};
  for (DType d : kFloats) {
    const bool f64 = d == DType::f64;
    std::mt19937_64 rng(20);
    double worst = 0, worstX = 0, worstScaled = 0;
    auto check = [&](double x) {
      if (!f64) x = static_cast<float>(x);
      const LD r = refGeluTanh(x), u = std::sqrt(2 / kPi) * (x + 0.044715L * x * x * x);
      const double got = f64 ? eval64(Op::gelu, x, tanhForm) : eval32(Op::gelu, static_cast<float>(x), tanhForm);
      const double e = static_cast<double>(std::fabs(got - r) / ulpAt(r, d));
      const double bound = 8 + 8 * static_cast<double>(std::fabs(u));
      ASSERT_LE(e, bound) << "gelu tanh " << dtypeName(d) << " at " << x;
      if (e > worst) worst = e, worstX = x;
      worstScaled = std::max(worstScaled, e / bound);
    };
    std::uniform_real_distribution<double> mid(-4, 8), left(f64 ? -20 : -9, -4), right(8, 1e6);
    for (int i = 0; i < kPoints; ++i) check(mid(rng));
    for (int i = 0; i < kPoints / 4; ++i) check(left(rng));
    for (int i = 0; i < kPoints / 8; ++i) check(right(rng));
    for (int i = 0; i < kPoints / 8; ++i) check(std::exp(std::uniform_real_distribution<double>(-69, 1.4)(rng)));
    std::printf("[ measured ] gelu tanh %s: max %.2f ulp at x = %.9g; at most %.2f of the bound 8 + 8|u|\n",
                dtypeName(d).data(), worst, worstX, worstScaled);
  }
}

// softplus with beta 1 and 2 (a power of two, so x beta is exact and the
// threshold falls where the reference puts it) and threshold 20.
LD refSoftplus(LD x) { return x > 20 ? x : std::log1p(std::exp(x)); }
LD refSoftplusBeta2(LD x) { return 2 * x > 20 ? x : std::log1p(std::exp(2 * x)) / 2; }

TEST(ScalarFormulasMath, Softplus) {
  const Attributes beta2 = {{"beta", 2.0}, {"threshold", 20.0}};
  for (DType d : kFloats) {
    const bool f64 = d == DType::f64;
    // From where exp's results are normal (f32: 2^-126 at -87.3; f64: -708)
    // to past the threshold; the large negative x are where log(1 + exp)
    // would lose every digit and log1p keeps them.
    const double lo = f64 ? -700 : -80;
    Sweep s{"softplus", Op::softplus, d, refSoftplus, 2.0};
    s.uniform(lo, 30, kPoints, 40);
    s.uniform(-3, 3, kPoints / 2, 41);  // both sides of log1p's switch at exp(x) = sqrt(2) - 1
    s.logUniform(1e-30, 20, kPoints / 4, 42);
    s.report();
    Sweep t{"softplus beta 2", Op::softplus, d, refSoftplusBeta2, 2.0, beta2};
    t.uniform(lo / 2, 15, kPoints / 2, 43);
    t.report();
  }
}

TEST(ScalarFormulasMath, SoftplusSpecialValuesAndThreshold) {
  for (DType d : kFloats) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    auto eval = [&](double x, const Attributes& a = {}) {
      return d == DType::f64 ? eval64(Op::softplus, x, a) : eval32(Op::softplus, static_cast<float>(x), a);
    };
    EXPECT_EQ(eval(INFINITY), INFINITY);
    EXPECT_EQ(eval(-INFINITY), 0.0);
    EXPECT_TRUE(std::isnan(eval(NAN)));
    EXPECT_EQ(eval(0.0), d == DType::f64 ? std::log(2.0) : static_cast<float>(std::log(2.0)));
    EXPECT_EQ(eval(-0.0), eval(0.0));
    // Beyond the threshold (strictly) the result is x itself; at it, the formula.
    EXPECT_EQ(eval(20.5), 20.5);
    EXPECT_EQ(eval(1024.0), 1024.0);
    const Attributes low = {{"beta", 1.0}, {"threshold", 1.0}};
    EXPECT_EQ(eval(1.5, low), 1.5);
    EXPECT_NEAR(eval(1.0, low), 1.3132616875182228, 1e-6) << "log1p(e) at the threshold itself";
    // beta scales: softplus(x, beta) = softplus(beta x) / beta.
    const Attributes beta4 = {{"beta", 4.0}, {"threshold", 20.0}};
    EXPECT_EQ(eval(0.75, beta4), eval(3.0) / 4);
    // The attributes are PyTorch's defaults when missing.
    EXPECT_EQ(eval(-3.0), eval(-3.0, {{"beta", 1.0}, {"threshold", 20.0}}));
    EXPECT_EQ(eval(20.0), eval(20.0, {{"beta", 1.0}, {"threshold", 20.0}}));
  }
  // Large negative x: exp(x) itself, to the last bit where log1p(t) = t.
  EXPECT_EQ(eval64(Op::softplus, -600.0), eval64(Op::exp, -600.0));
  EXPECT_EQ(eval32(Op::softplus, -60.0f), eval32(Op::exp, -60.0f));
  EXPECT_EQ(eval32(Op::softplus, -90.0f), 0.0f) << "f32 exp flushes below -87.34 (docs/ops.md)";
}

TEST(ScalarFormulasMath, AbsSpecialValues) {
  for (DType d : kFloats) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    auto abs = [&](double x) { return d == DType::f64 ? eval64(Op::abs, x) : eval32(Op::abs, static_cast<float>(x)); };
    EXPECT_EQ(abs(-2.5), 2.5);
    EXPECT_EQ(abs(3.0), 3.0);
    EXPECT_FALSE(std::signbit(abs(-0.0))) << "abs(-0) = +0";
    EXPECT_EQ(abs(-INFINITY), INFINITY);
    EXPECT_TRUE(std::isnan(abs(-NAN)));
    EXPECT_FALSE(std::signbit(abs(-NAN))) << "abs clears the sign bit of NaN too";
    EXPECT_EQ(abs(-1e-310), d == DType::f64 ? 1e-310 : 0.0);
  }
  for (DType d : {DType::i32, DType::i64}) {
    const int64_t min = d == DType::i32 ? INT32_MIN : INT64_MIN, max = d == DType::i32 ? INT32_MAX : INT64_MAX;
    auto abs = [&](int64_t v) {
      const ScalarValue in[] = {ScalarValue::ofInt(d, v)};
      return evalScalar(Op::abs, in).i;
    };
    EXPECT_EQ(abs(-7), 7);
    EXPECT_EQ(abs(0), 0);
    EXPECT_EQ(abs(max), max);
    EXPECT_EQ(abs(-max), max);
    EXPECT_EQ(abs(min), min) << "wraps, as PyTorch's abs(INT_MIN)";
  }
  EXPECT_EQ(errorOf([] {
              const ScalarValue in[] = {ScalarValue::ofInt(DType::boolean, 1)};
              evalScalar(Op::abs, in);
            }),
            "abs: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[]@cpu");
}

TEST(ScalarFormulasMath, RsqrtSpecialValues) {
  for (DType d : kFloats) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    auto rsqrt = [&](double x) {
      return d == DType::f64 ? eval64(Op::rsqrt, x) : eval32(Op::rsqrt, static_cast<float>(x));
    };
    EXPECT_EQ(rsqrt(0.0), INFINITY);
    EXPECT_EQ(rsqrt(-0.0), -INFINITY) << "1 / sqrt(-0) = 1 / -0, as PyTorch";
    EXPECT_EQ(rsqrt(INFINITY), 0.0);
    EXPECT_TRUE(std::isnan(rsqrt(-1.0)));
    EXPECT_TRUE(std::isnan(rsqrt(-INFINITY)));
    EXPECT_TRUE(std::isnan(rsqrt(NAN)));
    EXPECT_EQ(rsqrt(4.0), 0.5);
    EXPECT_EQ(rsqrt(0.25), 2.0);
  }
  // The smallest subnormal f32, 2^-149: 1/sqrt is 2^74.5, finite.
  EXPECT_EQ(eval32(Op::rsqrt, 0x1p-149f), static_cast<float>(1 / std::sqrt(0x1p-149L)));
}

TEST(ScalarFormulasMath, SinAndCosSpecialValues) {
  for (DType d : kFloats) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    auto eval = [&](Op op, double x) { return d == DType::f64 ? eval64(op, x) : eval32(op, static_cast<float>(x)); };
    EXPECT_EQ(eval(Op::sin, 0.0), 0.0);
    EXPECT_FALSE(std::signbit(eval(Op::sin, 0.0)));
    EXPECT_TRUE(std::signbit(eval(Op::sin, -0.0))) << "sin(-0) = -0";
    EXPECT_EQ(eval(Op::cos, 0.0), 1.0);
    EXPECT_EQ(eval(Op::cos, -0.0), 1.0);
    for (Op op : {Op::sin, Op::cos}) {
      EXPECT_TRUE(std::isnan(eval(op, INFINITY)));
      EXPECT_TRUE(std::isnan(eval(op, -INFINITY)));
      EXPECT_TRUE(std::isnan(eval(op, NAN)));
    }
    // Tiny x: sin(x) = x, cos(x) = 1 (the denormals included).
    for (double x : {1e-10, 1e-30, 1e-40, -1e-42}) {
      EXPECT_EQ(eval(Op::sin, x), d == DType::f64 ? x : static_cast<float>(x)) << x;
      EXPECT_EQ(eval(Op::cos, x), 1.0) << x;
    }
  }
}

TEST(ScalarFormulasMath, ErfSpecialValues) {
  for (DType d : kFloats) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    auto erf = [&](double x) { return d == DType::f64 ? eval64(Op::erf, x) : eval32(Op::erf, static_cast<float>(x)); };
    EXPECT_EQ(erf(0.0), 0.0);
    EXPECT_TRUE(std::signbit(erf(-0.0)));
    EXPECT_EQ(erf(INFINITY), 1.0);
    EXPECT_EQ(erf(-INFINITY), -1.0);
    EXPECT_TRUE(std::isnan(erf(NAN)));
    EXPECT_EQ(erf(6.0), 1.0);
    EXPECT_EQ(erf(-30.0), -1.0);
    const LD tiny = 1e-30f;  // erf(x) = 2x/sqrt(pi) for tiny x
    EXPECT_LE(std::fabs(erf(static_cast<double>(tiny)) - tiny * 2 / std::sqrt(kPi)), ulpAt(tiny * 1.13L, d));
  }
}

TEST(ScalarFormulasMath, SiluAndGeluSpecialValues) {
  const Attributes tanhForm = {{"approximate", int64_t{1}}};
  for (DType d : kFloats) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    auto eval = [&](Op op, double x, const Attributes& a = {}) {
      return d == DType::f64 ? eval64(op, x, a) : eval32(op, static_cast<float>(x), a);
    };
    for (const Attributes& a : {Attributes{}, tanhForm, Attributes{{"approximate", int64_t{0}}}}) {
      const Op op = Op::gelu;
      EXPECT_EQ(eval(op, 0.0, a), 0.0);
      EXPECT_TRUE(std::signbit(eval(op, -0.0, a))) << "gelu(-0) = -0, as PyTorch";
      EXPECT_EQ(eval(op, INFINITY, a), INFINITY);
      EXPECT_TRUE(std::isnan(eval(op, -INFINITY, a))) << "-inf * 0: NaN, as PyTorch";
      EXPECT_TRUE(std::isnan(eval(op, NAN, a)));
      EXPECT_EQ(eval(op, 50.0, a), 50.0);
      EXPECT_EQ(eval(op, -1000.0, a), 0.0);
      EXPECT_TRUE(std::signbit(eval(op, -1000.0, a)));
    }
    EXPECT_EQ(eval(Op::silu, 0.0), 0.0);
    EXPECT_EQ(eval(Op::silu, INFINITY), INFINITY);
    EXPECT_TRUE(std::isnan(eval(Op::silu, -INFINITY))) << "-inf / inf: NaN, as PyTorch";
    EXPECT_TRUE(std::isnan(eval(Op::silu, NAN)));
    EXPECT_EQ(eval(Op::silu, -1000.0), 0.0);
    EXPECT_TRUE(std::signbit(eval(Op::silu, -1000.0)));
    EXPECT_EQ(eval(Op::silu, 1000.0), 1000.0);
  }
  EXPECT_EQ(errorOf([] {
              eval32(Op::gelu, 1.0f, {{"approximate", int64_t{2}}});
            }),
            "gelu: attribute 'approximate' must be 0 (erf) or 1 (tanh), got 2");
}

/// Whether the f32 y is the correctly rounded 1/sqrt(x), for positive
/// finite x: the halfway points m- < y < m+ around y must satisfy
/// m-² x < 1 < m+² x, checked exactly in integers.
bool rsqrtCorrectlyRounded(float x, float y) {
  using U = unsigned __int128;
  auto decompose = [](double v, uint64_t& m, int& e) {  // v = m 2^e, m < 2^31
    int k = 0;
    m = static_cast<uint64_t>(std::ldexp(std::frexp(v, &k), 31));
    e = k - 31;
  };
  // Whether m² X 2^(2e + ex) > 1.
  auto above = [](U m2x, int exponent) {
    int bits = 0;
    for (U t = m2x; t; t >>= 1) ++bits;
    return bits + exponent - 1 > 0 || (bits + exponent - 1 == 0 && (m2x & (m2x - 1)) != 0);
  };
  const uint32_t yu = std::bit_cast<uint32_t>(y);
  const double hi = (static_cast<double>(y) + std::bit_cast<float>(yu + 1)) / 2;
  const double lo = (static_cast<double>(y) + std::bit_cast<float>(yu - 1)) / 2;
  uint64_t X, H, L;
  int ex, eh, el;
  decompose(x, X, ex);
  decompose(hi, H, eh);
  decompose(lo, L, el);
  return above(U(H) * H * X, 2 * eh + ex) && !above(U(L) * L * X, 2 * el + ex);
}

TEST(ScalarFormulasMath, RsqrtF32IsCorrectlyRounded) {
  // Every 97th positive f32, all binades: about 22 million values.
  long checked = 0;
  for (uint32_t u = 1; u < 0x7f800000u; u += 97, ++checked) {
    const float x = std::bit_cast<float>(u);
    ASSERT_TRUE(rsqrtCorrectlyRounded(x, eval32(Op::rsqrt, x))) << std::hexfloat << x;
  }
  EXPECT_GT(checked, 20000000);
}

TEST(ScalarFormulasMath, RsqrtF32IsCorrectlyRoundedNearEveryPowerOfTwoAndInEveryBinade) {
  // A sample of the 2^31 - 2^23 positive finite f32 (all of them take
  // minutes): 8192 random inputs in each of the 255 binades, subnormals
  // included, and the 1024 inputs on either side of each of the 277 powers
  // of two, where the result is exact or crosses a binade and where an
  // argument reduction goes wrong first: about 2.66 million inputs.
  std::vector<uint32_t> inputs;
  std::mt19937 rng(20240611);
  for (uint32_t binade = 0; binade < 255; ++binade)
    for (int i = 0; i < 8192; ++i) inputs.push_back(std::max<uint32_t>(1, (binade << 23) | (rng() & 0x7fffffu)));
  std::vector<uint32_t> powers;
  for (uint32_t j = 0; j < 23; ++j) powers.push_back(1u << j);                       // 2^-149 .. 2^-127
  for (uint32_t binade = 1; binade < 255; ++binade) powers.push_back(binade << 23);  // 2^-126 .. 2^127
  for (uint32_t p : powers)
    for (int64_t d = -1024; d <= 1024; ++d)
      if (const int64_t u = int64_t{p} + d; u >= 1 && u < 0x7f800000) inputs.push_back(static_cast<uint32_t>(u));
  ASSERT_EQ(powers.size(), 277u);
  ASSERT_GT(inputs.size(), 2600000u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float x = std::bit_cast<float>(inputs[i]);
    const float y = eval32(Op::rsqrt, x);
    ASSERT_TRUE(rsqrtCorrectlyRounded(x, y)) << std::hexfloat << x << " -> " << y;
    // The check can fail: a result one ulp off, either way, is refused.
    if (i % 8 == 0) {
      ASSERT_FALSE(rsqrtCorrectlyRounded(x, std::nextafter(y, INFINITY))) << std::hexfloat << x;
      ASSERT_FALSE(rsqrtCorrectlyRounded(x, std::nextafter(y, 0.0f))) << std::hexfloat << x;
    }
  }
}

}  // namespace
}  // namespace kiln::ir
