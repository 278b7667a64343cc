// pow through the C++ evaluator: floats against the long double powl over
// sweeps that reach the overflow and underflow thresholds (f64 within 1 ulp,
// f32 within 0.5 ulp plus 2^-20: it is pow64 rounded once; measured 0.89
// and 0.5), exact results where the power is representable, C99's special
// values (Annex F.9.4.4) against the C library's pow bit for bit, and
// integers against PyTorch's powi (ATen: repeated squaring, wrapping; a
// negative exponent gives 1, -1 or 0) on special and random operands.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "common/error_of.h"
#include "ir/scalar_eval.h"

namespace kiln::ir {
namespace {

using LD = long double;

double pow64(double x, double y) {
  const double in[] = {x, y};
  return evalScalar(Op::pow, DType::f64, in);
}
float pow32(float x, float y) {
  const float in[] = {x, y};
  return evalScalarF32(Op::pow, in);
}

LD ulpAt(LD ref, DType dtype) {
  const bool f64 = dtype == DType::f64;
  const LD a = std::fabs(ref);
  if (a < (f64 ? DBL_MIN : FLT_MIN)) return std::ldexp(1.0L, f64 ? -1074 : -149);
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0L, e - (f64 ? 53 : 24));
}

/// The worst ulp error over the (x, y) checked; results beyond the largest
/// finite value must be inf.
struct PowSweep {
  DType dtype;
  double bound;
  double worst = 0, worstX = 0, worstY = 0;
  long points = 0;
  void check(double x, double y) {
    const bool f64 = dtype == DType::f64;
    if (!f64) x = static_cast<float>(x), y = static_cast<float>(y);
    const LD r = std::pow(static_cast<LD>(x), static_cast<LD>(y));
    const double got = f64 ? pow64(x, y) : pow32(static_cast<float>(x), static_cast<float>(y));
    ++points;
    if (std::fabs(r) > (f64 ? DBL_MAX : FLT_MAX) * (1 + 0x1p-60L)) {
      EXPECT_TRUE(std::isinf(got) && std::signbit(got) == std::signbit(r)) << "pow(" << x << ", " << y << ")";
      return;
    }
    const double e = static_cast<double>(std::fabs(got - r) / ulpAt(r, dtype));
    if (!(e <= worst)) worst = e, worstX = x, worstY = y;
  }
  void report() {
    std::printf("[ measured ] pow %s: max %.4f ulp at pow(%.17g, %.17g) over %ld points (bound %g)\n",
                dtypeName(dtype).data(), worst, worstX, worstY, points, bound);
    EXPECT_LE(worst, bound) << "pow(" << worstX << ", " << worstY << ")";
  }
};

TEST(ScalarFormulasPow, FloatsAgainstLongDouble) {
  for (DType d : {DType::f64, DType::f32}) {
    const bool f64 = d == DType::f64;
    PowSweep s{d, f64 ? 1.0 : 0.5001};
    const double maxLog = f64 ? 709.78 : 88.72, minLog = f64 ? -744.4 : -103.2;
    std::mt19937_64 rng(f64 ? 1 : 2);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < 400000; ++i) {
      double x = 0, y = 0;
      switch (i % 5) {
        case 0:  // any magnitude of x, y spread so that x^y covers the whole range and beyond
          x = std::exp((u(rng) - 0.5) * 2 * maxLog);
          y = (minLog + (maxLog - minLog) * u(rng)) * 1.05 / std::log(x);
          break;
        case 1:  // x near 1, large y: where log x must be accurate to far more than f64
          x = 1 + (u(rng) - 0.5) * 1e-3;
          y = (u(rng) - 0.5) * 1.4e6;
          break;
        case 2:  // small exponents
          x = std::exp((u(rng) - 0.5) * 1400);
          y = (u(rng) - 0.5) * 4;
          break;
        case 3:  // negative bases, integer exponents
          x = -std::exp((u(rng) - 0.5) * 20);
          y = std::floor((u(rng) - 0.5) * 60);
          break;
        case 4:  // subnormal results
          x = std::exp(-u(rng) * 10 - 0.5);
          y = (f64 ? 1100 : 155) / -std::log(x) * (0.95 + 0.1 * u(rng));
          break;
      }
      s.check(x, y);
    }
    s.report();
  }
}

TEST(ScalarFormulasPow, RepresentablePowersAreExact) {
  EXPECT_EQ(pow64(3, 20), 3486784401.0);
  EXPECT_EQ(pow64(10, 22), 1e22);
  EXPECT_EQ(pow64(10, -1), 0.1) << "1/10 rounded once";
  EXPECT_EQ(pow64(2, -1074), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(pow64(2, 1023), 0x1p1023);
  EXPECT_EQ(pow64(-2, 3), -8.0);
  EXPECT_EQ(pow64(4, 0.5), 2.0);
  EXPECT_EQ(pow64(0.25, -1.5), 8.0);
  EXPECT_EQ(pow64(1.5, 2), 2.25);
  EXPECT_EQ(pow32(3, 15), 14348907.0f);
  EXPECT_EQ(pow32(2, -149), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(pow32(-0.5f, 3), -0.125f);
  for (int b = 2; b < 12; ++b)
    for (int e = 0; std::pow(static_cast<double>(b), e) < 0x1p53; ++e)
      ASSERT_EQ(pow64(b, e), std::pow(static_cast<double>(b), e)) << b << "^" << e;
}

TEST(ScalarFormulasPow, SpecialValuesAsTheCLibrary) {
  // Every pair of these against the C library, which implements C99 Annex
  // F.9.4.4 (glibc): bit for bit where the result is a zero, an infinity,
  // +-1 or NaN (any NaN), within 1 ulp elsewhere (f32: 0.5 ulp).
  const double values[] = {0.0,    -0.0,    1.0,        -1.0,   0.5,    -0.5,     2.0,       -2.0,
                           3.0,    -3.0,    2.5,        -2.5,   1e-300, -1e-300,  1e300,     -1e300,
                           0x1p53, -0x1p53, 0x1p53 + 2, 0x1p64, 1e20,   INFINITY, -INFINITY, NAN};
  for (double x : values)
    for (double y : values) {
      const double want = std::pow(x, y), got = pow64(x, y);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "pow(" << x << ", " << y << ") = " << got;
      } else if (want == 0 || std::isinf(want) || std::fabs(want) == 1) {
        EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want))
            << "pow(" << x << ", " << y << ") = " << got << ", C says " << want;
      } else {
        EXPECT_LE(std::fabs(got - want), ulpAt(want, DType::f64)) << "pow(" << x << ", " << y << ")";
      }
      const float xf = static_cast<float>(x), yf = static_cast<float>(y);
      const LD want32 = std::pow(static_cast<LD>(xf), static_cast<LD>(yf));
      const float got32 = pow32(xf, yf);
      if (std::isnan(want32)) {
        EXPECT_TRUE(std::isnan(got32)) << "f32 pow(" << xf << ", " << yf << ") = " << got32;
      } else if (want32 == 0 || std::fabs(want32) > FLT_MAX || std::fabs(want32) == 1) {
        EXPECT_EQ(got32, static_cast<float>(want32)) << "f32 pow(" << xf << ", " << yf << ")";
        EXPECT_EQ(std::signbit(got32), std::signbit(want32)) << "f32 pow(" << xf << ", " << yf << ")";
      } else {
        EXPECT_LE(std::fabs(got32 - want32), ulpAt(want32, DType::f32) / 2) << "f32 pow(" << xf << ", " << yf << ")";
      }
    }
  // The named cases, for the reader.
  EXPECT_EQ(pow64(NAN, 0.0), 1.0) << "pow(x, 0) = 1 for any x";
  EXPECT_EQ(pow64(1.0, NAN), 1.0) << "pow(1, y) = 1 for any y";
  EXPECT_EQ(pow64(-1.0, INFINITY), 1.0);
  EXPECT_TRUE(std::isnan(pow64(-8.0, 1.0 / 3))) << "a negative base to a non-integer power";
  EXPECT_EQ(pow64(-0.0, -3.0), -INFINITY);
  EXPECT_EQ(pow64(-0.0, -2.0), INFINITY);
  EXPECT_TRUE(std::signbit(pow64(-0.0, 3.0)));
  EXPECT_EQ(pow64(-INFINITY, 3.0), -INFINITY);
  EXPECT_TRUE(std::signbit(pow64(-INFINITY, -3.0)));
  EXPECT_EQ(pow64(0.5, -INFINITY), INFINITY);
  EXPECT_EQ(pow64(2.0, -INFINITY), 0.0);
}

/// PyTorch's integer pow (aten/src/ATen/native/Pow.h, powi), with wrapping
/// multiplication written out in unsigned arithmetic.
template <typename T>
T powi(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return b % 2 != 0 ? -1 : 1;  // not (-b) % 2, which overflows for b = INT_MIN
    return 0;
  }
  U result = 1, base = static_cast<U>(a);
  while (b) {
    if (b & 1) result *= base;
    b /= 2;
    base *= base;
  }
  return static_cast<T>(result);
}

TEST(ScalarFormulasPow, IntegersAsPyTorch) {
  auto eval = [](DType d, int64_t a, int64_t b) {
    const ScalarValue in[] = {ScalarValue::ofInt(d, a), ScalarValue::ofInt(d, b)};
    return evalScalar(Op::pow, in).i;
  };
  EXPECT_EQ(eval(DType::i32, 0, 0), 1);
  EXPECT_EQ(eval(DType::i32, 3, 4), 81);
  EXPECT_EQ(eval(DType::i32, -2, 31), INT32_MIN);
  EXPECT_EQ(eval(DType::i32, 2, 32), 0) << "wraps";
  EXPECT_EQ(eval(DType::i32, 1, -5), 1);
  EXPECT_EQ(eval(DType::i32, -1, -3), -1);
  EXPECT_EQ(eval(DType::i32, -1, -4), 1);
  EXPECT_EQ(eval(DType::i32, 2, -1), 0);
  EXPECT_EQ(eval(DType::i32, 0, -1), 0);
  EXPECT_EQ(eval(DType::i64, 5, 63), -5790225837517463603) << "PyTorch's result";
  EXPECT_EQ(eval(DType::i64, 3, 40), -6289078614652622815) << "3^40 - 2^64, as PyTorch";
  const int64_t special[] = {0, 1, -1, 2, -2, 3, 7, -7, 31, 32, 62, 63, 64, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  std::mt19937_64 rng(3);
  for (DType d : {DType::i32, DType::i64}) {
    auto check = [&](int64_t a, int64_t b) {
      const int64_t want =
          d == DType::i32 ? powi<int32_t>(static_cast<int32_t>(a), static_cast<int32_t>(b)) : powi<int64_t>(a, b);
      ASSERT_EQ(eval(d, a, b), want) << dtypeName(d) << " " << a << " ^ " << b;
    };
    for (int64_t a : special)
      for (int64_t b : special) {
        if (d == DType::i32 && (a != static_cast<int32_t>(a) || b != static_cast<int32_t>(b))) continue;
        check(a, b);
      }
    for (int i = 0; i < 20000; ++i) {
      int64_t a = static_cast<int64_t>(rng() % 41) - 20, b = static_cast<int64_t>(rng() % 80) - 10;
      if (i % 2) a = static_cast<int64_t>(rng()), b = static_cast<int64_t>(rng() >> (1 + rng() % 63));
      if (d == DType::i32) a = static_cast<int32_t>(a), b = static_cast<int32_t>(b);
      check(a, b);
    }
  }
}

TEST(ScalarFormulasPow, BoolIsRejected) {
  EXPECT_EQ(errorOf([] {
              const ScalarValue in[] = {ScalarValue::ofInt(DType::boolean, 1), ScalarValue::ofInt(DType::boolean, 1)};
              evalScalar(Op::pow, in);
            }),
            "pow: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[]@cpu and bool[]@cpu");
}

}  // namespace
}  // namespace kiln::ir
