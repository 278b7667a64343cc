// Accuracy of the f64 transcendentals (ir/scalar_formulas_f64.h) through the
// C++ evaluator, swept against the long double libm (64-bit mantissa on
// x86-64) and held to the bounds the header states: exp and log within
// 2 ulp, tanh and sigmoid within 4 ulp. Results below DBL_MIN are checked in
// units of the subnormal spacing 2^-1074, except where the formula flushes
// (sigmoid where exp(-x) overflows): there only sign and size are checked.
// Special values follow IEEE/libm.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "ir/scalar_eval.h"

namespace kiln::ir {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double eval(Op op, double x) {
  const double in[] = {x};
  return evalScalar(op, DType::f64, in);
}

/// The spacing of f64 values around `ref` (the subnormal spacing below DBL_MIN).
long double ulpAt(long double ref) {
  const long double a = std::fabs(ref);
  if (a < DBL_MIN) return std::ldexp(1.0L, -1074);
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): f64 has 53 bits, so 2^(e-53)
  return std::ldexp(1.0L, e - 53);
}

struct Sweep {
  const char* name;
  Op op;
  long double (*ref)(long double);
  double boundUlp;
  bool flushesTiny = false;  ///< results below DBL_MIN may be 0
  double worst = 0;
  double worstX = 0;
  long points = 0;

  void check(double x) {
    const long double r = ref(x);
    const double got = eval(op, x);
    ++points;
    if (r > DBL_MAX) {
      EXPECT_EQ(got, kInf) << name << "(" << x << ")";
      return;
    }
    if (flushesTiny && std::fabs(r) < DBL_MIN) {
      EXPECT_TRUE(std::fabs(got) < DBL_MIN && (got == 0 || std::signbit(got) == std::signbit(r)))
          << name << "(" << x << ") = " << got << ", expected about " << static_cast<double>(r);
      return;
    }
    const double e = static_cast<double>(std::fabs(static_cast<long double>(got) - r) / ulpAt(r));
    if (e > worst) {
      worst = e;
      worstX = x;
    }
  }
  void report() {
    std::printf("[ measured ] %s (f64): max %.3f ulp at x = %.17g over %ld points (bound %.1f)\n", name, worst, worstX,
                points, boundUlp);
    EXPECT_LE(worst, boundUlp) << name << " at x = " << worstX << ": got " << eval(op, worstX) << ", libm "
                               << static_cast<double>(ref(worstX));
  }
  void linear(double lo, double hi, int n) {
    for (int i = 0; i <= n; ++i) check(lo + (hi - lo) * i / n);
  }
  void logSpaced(double lo, double hi, int n, double sign = 1.0) {
    const double a = std::log(lo), b = std::log(hi);
    for (int i = 0; i <= n; ++i) check(sign * std::exp(a + (b - a) * i / n));
  }
  void random(double lo, double hi, int n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    for (int i = 0; i < n; ++i) check(d(rng));
  }
};

long double refExp(long double x) { return std::exp(x); }
long double refLog(long double x) { return std::log(x); }
long double refTanh(long double x) { return std::tanh(x); }
long double refSigmoid(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

constexpr int kPoints = 1000000;

TEST(ScalarFormulasF64, ExpWithin2Ulp) {
  Sweep s{"exp", Op::exp, refExp, 2.0};
  s.linear(-745.2, 709.9, kPoints);
  s.random(-1, 1, kPoints / 2, 1);
  s.logSpaced(1e-300, 1, kPoints / 4, -1.0);
  s.logSpaced(1e-300, 1, kPoints / 4);
  s.linear(-745.2, -707, kPoints / 4);  // subnormal results
  s.report();
}

TEST(ScalarFormulasF64, LogWithin2Ulp) {
  Sweep s{"log", Op::log, refLog, 2.0};
  s.logSpaced(1e-300, 1e300, kPoints);
  s.logSpaced(std::numeric_limits<double>::denorm_min(), DBL_MIN, kPoints / 4);  // subnormal inputs
  s.logSpaced(DBL_MIN, DBL_MAX, kPoints / 4);
  s.linear(0.5, 2.0, kPoints / 2);  // around log(1) = 0, where the result is small
  s.random(0.99, 1.01, kPoints / 4, 2);
  s.report();
}

TEST(ScalarFormulasF64, TanhWithin4Ulp) {
  Sweep s{"tanh", Op::tanh, refTanh, 4.0};
  s.linear(-40, 40, kPoints);
  s.logSpaced(1e-300, 40, kPoints / 4);
  s.logSpaced(1e-300, 40, kPoints / 4, -1.0);
  s.linear(0.6, 0.65, kPoints / 4);  // both sides of the switch at 0.625
  s.report();
}

TEST(ScalarFormulasF64, SigmoidWithin4Ulp) {
  Sweep s{"sigmoid", Op::sigmoid, refSigmoid, 4.0, /*flushesTiny=*/true};
  s.linear(-760, 40, kPoints);
  s.random(-20, 20, kPoints / 2, 3);
  s.logSpaced(1e-300, 1, kPoints / 4);
  s.logSpaced(1e-300, 1, kPoints / 4, -1.0);
  s.report();
}

TEST(ScalarFormulasF64, SpecialValues) {
  EXPECT_EQ(eval(Op::exp, 0.0), 1.0);
  EXPECT_EQ(eval(Op::exp, -kInf), 0.0);
  EXPECT_EQ(eval(Op::exp, kInf), kInf);
  EXPECT_EQ(eval(Op::exp, 709.79), kInf);
  EXPECT_EQ(eval(Op::exp, -746.0), 0.0);
  EXPECT_GT(eval(Op::exp, -745.0), 0.0) << "subnormal results are kept";
  EXPECT_NEAR(eval(Op::exp, 1.0), 2.718281828459045, 1e-15);
  EXPECT_TRUE(std::isnan(eval(Op::exp, kNaN)));
  EXPECT_EQ(eval(Op::log, 1.0), 0.0);
  EXPECT_EQ(eval(Op::log, 0.0), -kInf);
  EXPECT_EQ(eval(Op::log, -0.0), -kInf);
  EXPECT_TRUE(std::isnan(eval(Op::log, -1.0)));
  EXPECT_EQ(eval(Op::log, kInf), kInf);
  EXPECT_EQ(eval(Op::log, std::numeric_limits<double>::denorm_min()), -744.44007192138126);
  EXPECT_TRUE(std::isnan(eval(Op::log, kNaN)));
  EXPECT_EQ(eval(Op::tanh, kInf), 1.0);
  EXPECT_EQ(eval(Op::tanh, -kInf), -1.0);
  EXPECT_TRUE(std::signbit(eval(Op::tanh, -0.0)));
  EXPECT_EQ(eval(Op::tanh, 1e-300), 1e-300);
  EXPECT_TRUE(std::isnan(eval(Op::tanh, kNaN)));
  EXPECT_EQ(eval(Op::sigmoid, 0.0), 0.5);
  EXPECT_EQ(eval(Op::sigmoid, kInf), 1.0);
  EXPECT_EQ(eval(Op::sigmoid, -kInf), 0.0);
  EXPECT_TRUE(std::isnan(eval(Op::sigmoid, kNaN)));
}

}  // namespace
}  // namespace kiln::ir
