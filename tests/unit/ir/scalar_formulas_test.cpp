// Unit tests for the scalar formulas through evalScalarF32, the evaluator
// every generated kernel is compared with. The transcendentals are swept
// densely against double-precision libm and held to the bounds that
// ir/scalar_formulas.h states: exp and log within 2 ulp, tanh and sigmoid
// within 4 ulp. (Measured when these tests were written, over every finite
// f32 input with a normal result: exp 0.99, log 0.83, tanh 1.33, sigmoid
// 2.48 ulp.) Special values follow IEEE/libm and PyTorch: infinities, NaN
// (propagated by relu, maximum and minimum from either side), zeros and
// denormals. +, -, *, / and sqrt are correctly rounded.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "ir/scalar_eval.h"
#include "runtime/error.h"

namespace kiln::ir {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

float eval(Op op, float x) {
  const float in[] = {x};
  return evalScalarF32(op, in);
}
float eval(Op op, float x, float y) {
  const float in[] = {x, y};
  return evalScalarF32(op, in);
}

// The spacing of f32 values around `ref` (the denormal spacing below FLT_MIN).
double ulpAt(double ref) {
  const double a = std::fabs(ref);
  if (a < FLT_MIN) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): f32 has 24 bits, so 2^(e-24)
  return std::ldexp(1.0, e - 24);
}
double ulpError(float got, double ref) { return std::fabs(static_cast<double>(got) - ref) / ulpAt(ref); }

// Worst error of `op` against `ref` over `points`, asserting each point.
struct Sweep {
  const char* name;
  Op op;
  double (*ref)(double);
  double boundUlp;
  double worst = 0;
  float worstX = 0;

  void check(float x) {
    const double r = ref(static_cast<double>(x));
    const float got = eval(op, x);
    if (r > FLT_MAX) {
      EXPECT_EQ(got, kInf) << name << "(" << x << ")";
      return;
    }
    if (std::fabs(r) < FLT_MIN) {
      // exp flushes results below 2^-126 to 0 (documented), sigmoid with it.
      EXPECT_TRUE(std::fabs(got) <= FLT_MIN && (got == 0 || std::signbit(got) == std::signbit(r)))
          << name << "(" << x << ") = " << got << ", expected about " << r;
      return;
    }
    const double e = ulpError(got, r);
    if (e > worst) {
      worst = e;
      worstX = x;
    }
  }
  void report() {
    std::printf("[ measured ] %s: max %.3f ulp at x = %.9g (bound %.1f)\n", name, worst, worstX, boundUlp);
    EXPECT_LE(worst, boundUlp) << name << " at x = " << worstX << ": got " << eval(op, worstX) << ", libm "
                               << ref(worstX);
  }
  void linear(double lo, double hi, int n) {
    for (int i = 0; i <= n; ++i) check(static_cast<float>(lo + (hi - lo) * i / n));
  }
  // n points log-spaced over [lo, hi], lo > 0, with `sign`.
  void logSpaced(double lo, double hi, int n, double sign = 1.0) {
    const double a = std::log(lo), b = std::log(hi);
    for (int i = 0; i <= n; ++i) check(static_cast<float>(sign * std::exp(a + (b - a) * i / n)));
  }
};

double refExp(double x) { return std::exp(x); }
double refLog(double x) { return std::log(x); }
double refTanh(double x) { return std::tanh(x); }
double refSigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr int kPoints = 1000000;

TEST(ScalarFormulas, ExpWithin2Ulp) {
  Sweep s{"exp", Op::exp, refExp, 2.0};
  s.linear(-100, 100, kPoints);
  s.linear(-1, 1, kPoints / 4);
  s.logSpaced(1e-30, 1, kPoints / 4, -1.0);
  s.report();
}

TEST(ScalarFormulas, LogWithin2Ulp) {
  Sweep s{"log", Op::log, refLog, 2.0};
  s.logSpaced(1e-30, 1e30, kPoints);
  s.logSpaced(kDenormMin, FLT_MIN, kPoints / 4);  // denormal inputs
  s.logSpaced(FLT_MIN, FLT_MAX, kPoints / 4);
  s.linear(0.5, 2.0, kPoints / 2);  // around log(1) = 0, where the result is small
  s.report();
}

TEST(ScalarFormulas, TanhWithin4Ulp) {
  Sweep s{"tanh", Op::tanh, refTanh, 4.0};
  s.linear(-20, 20, kPoints);
  s.logSpaced(1e-30, 20, kPoints / 4);
  s.logSpaced(1e-30, 20, kPoints / 4, -1.0);
  s.linear(0.5, 0.75, kPoints / 4);  // across the switch between the two formulas at 0.625
  s.report();
}

TEST(ScalarFormulas, SigmoidWithin4Ulp) {
  Sweep s{"sigmoid", Op::sigmoid, refSigmoid, 4.0};
  s.linear(-100, 100, kPoints);
  s.linear(-20, 20, kPoints / 2);
  s.report();
}

TEST(ScalarFormulas, TanhIsOdd) {
  for (int i = 0; i <= 100000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f * 2.0f;
    ASSERT_EQ(eval(Op::tanh, -x), -eval(Op::tanh, x)) << x;
  }
}

TEST(ScalarFormulas, ExpSpecialValues) {
  EXPECT_EQ(eval(Op::exp, kInf), kInf);
  EXPECT_EQ(eval(Op::exp, -kInf), 0.0f);
  EXPECT_TRUE(std::isnan(eval(Op::exp, kNaN)));
  EXPECT_TRUE(std::isnan(eval(Op::exp, -kNaN)));
  EXPECT_EQ(eval(Op::exp, 0.0f), 1.0f);
  EXPECT_EQ(eval(Op::exp, -0.0f), 1.0f);
  EXPECT_EQ(eval(Op::exp, kDenormMin), 1.0f);
  // The largest finite result and the first input that overflows: ln(FLT_MAX) = 88.7228391...
  const float lastFinite = std::nextafter(static_cast<float>(std::log(static_cast<double>(FLT_MAX))), 0.0f);
  EXPECT_TRUE(std::isfinite(eval(Op::exp, lastFinite))) << lastFinite;
  EXPECT_LE(ulpError(eval(Op::exp, lastFinite), std::exp(static_cast<double>(lastFinite))), 2.0);
  EXPECT_EQ(eval(Op::exp, std::nextafter(lastFinite, kInf)), kInf);
  EXPECT_EQ(eval(Op::exp, 1000.0f), kInf);
  // Results below 2^-126 flush to 0 (ir/scalar_formulas.h).
  EXPECT_EQ(eval(Op::exp, -88.0f), 0.0f);
  EXPECT_EQ(eval(Op::exp, -1000.0f), 0.0f);
  EXPECT_GE(eval(Op::exp, -87.0f), FLT_MIN);
}

TEST(ScalarFormulas, LogSpecialValues) {
  EXPECT_EQ(eval(Op::log, 0.0f), -kInf);
  EXPECT_EQ(eval(Op::log, -0.0f), -kInf);
  EXPECT_TRUE(std::isnan(eval(Op::log, -1.0f)));
  EXPECT_TRUE(std::isnan(eval(Op::log, -kDenormMin)));
  EXPECT_TRUE(std::isnan(eval(Op::log, -kInf)));
  EXPECT_EQ(eval(Op::log, kInf), kInf);
  EXPECT_TRUE(std::isnan(eval(Op::log, kNaN)));
  EXPECT_EQ(eval(Op::log, 1.0f), 0.0f);
  // Powers of two are exact multiples of ln 2; denormals included.
  for (int k : {-149, -140, -127, -126, -1, 1, 64, 127}) {
    const float x = std::ldexp(1.0f, k);
    EXPECT_LE(ulpError(eval(Op::log, x), k * std::log(2.0)), 2.0) << "log(2^" << k << ")";
  }
  EXPECT_LE(ulpError(eval(Op::log, FLT_MAX), std::log(static_cast<double>(FLT_MAX))), 2.0);
  EXPECT_LE(ulpError(eval(Op::log, 3.0e-39f), std::log(static_cast<double>(3.0e-39f))), 2.0);
}

TEST(ScalarFormulas, TanhSpecialValues) {
  EXPECT_EQ(eval(Op::tanh, kInf), 1.0f);
  EXPECT_EQ(eval(Op::tanh, -kInf), -1.0f);
  EXPECT_EQ(eval(Op::tanh, 20.0f), 1.0f);
  EXPECT_EQ(eval(Op::tanh, -20.0f), -1.0f);
  EXPECT_TRUE(std::isnan(eval(Op::tanh, kNaN)));
  EXPECT_EQ(eval(Op::tanh, kDenormMin), kDenormMin);
  EXPECT_EQ(eval(Op::tanh, 1e-20f), 1e-20f);
  const float zero = eval(Op::tanh, 0.0f), negZero = eval(Op::tanh, -0.0f);
  EXPECT_EQ(zero, 0.0f);
  EXPECT_FALSE(std::signbit(zero));
  EXPECT_EQ(negZero, 0.0f);
  EXPECT_TRUE(std::signbit(negZero)) << "tanh(-0) is -0 (IEEE, libm, PyTorch)";
}

TEST(ScalarFormulas, SigmoidSpecialValues) {
  EXPECT_EQ(eval(Op::sigmoid, -kInf), 0.0f);
  EXPECT_EQ(eval(Op::sigmoid, kInf), 1.0f);
  EXPECT_EQ(eval(Op::sigmoid, 0.0f), 0.5f);
  EXPECT_EQ(eval(Op::sigmoid, 100.0f), 1.0f);
  EXPECT_EQ(eval(Op::sigmoid, -200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(eval(Op::sigmoid, kNaN)));
}

TEST(ScalarFormulas, ReluAndNeg) {
  EXPECT_TRUE(std::isnan(eval(Op::relu, kNaN))) << "relu(NaN) is NaN, as in PyTorch";
  EXPECT_EQ(eval(Op::relu, -1.0f), 0.0f);
  EXPECT_EQ(eval(Op::relu, -kInf), 0.0f);
  EXPECT_EQ(eval(Op::relu, 2.5f), 2.5f);
  EXPECT_EQ(eval(Op::relu, kInf), kInf);
  EXPECT_EQ(eval(Op::relu, kDenormMin), kDenormMin);
  EXPECT_EQ(eval(Op::neg, 2.0f), -2.0f);
  EXPECT_TRUE(std::signbit(eval(Op::neg, 0.0f)));
  EXPECT_FALSE(std::signbit(eval(Op::neg, -0.0f)));
  EXPECT_EQ(eval(Op::neg, kInf), -kInf);
  EXPECT_TRUE(std::isnan(eval(Op::neg, kNaN)));
}

TEST(ScalarFormulas, MaximumAndMinimumPropagateNaNFromEitherSide) {
  for (Op op : {Op::maximum, Op::minimum}) {
    SCOPED_TRACE(std::string(opName(op)));
    EXPECT_TRUE(std::isnan(eval(op, kNaN, 1.0f)));
    EXPECT_TRUE(std::isnan(eval(op, 1.0f, kNaN)));
    EXPECT_TRUE(std::isnan(eval(op, kNaN, kNaN)));
    EXPECT_TRUE(std::isnan(eval(op, -kInf, kNaN)));
    EXPECT_TRUE(std::isnan(eval(op, kNaN, kInf)));
  }
  EXPECT_EQ(eval(Op::maximum, 1.0f, 2.0f), 2.0f);
  EXPECT_EQ(eval(Op::maximum, 2.0f, 1.0f), 2.0f);
  EXPECT_EQ(eval(Op::maximum, -kInf, -3.0f), -3.0f);
  EXPECT_EQ(eval(Op::minimum, 1.0f, 2.0f), 1.0f);
  EXPECT_EQ(eval(Op::minimum, 2.0f, 1.0f), 1.0f);
  EXPECT_EQ(eval(Op::minimum, -kInf, 3.0f), -kInf);
}

TEST(ScalarFormulas, SqrtSpecialValues) {
  EXPECT_TRUE(std::isnan(eval(Op::sqrt, -1.0f)));
  EXPECT_TRUE(std::isnan(eval(Op::sqrt, -kInf)));
  EXPECT_TRUE(std::isnan(eval(Op::sqrt, kNaN)));
  EXPECT_EQ(eval(Op::sqrt, kInf), kInf);
  EXPECT_EQ(eval(Op::sqrt, 4.0f), 2.0f);
  EXPECT_EQ(eval(Op::sqrt, 0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(eval(Op::sqrt, -0.0f))) << "sqrt(-0) = -0 (IEEE 754)";
}

TEST(ScalarFormulas, ArithmeticAndSqrtAreCorrectlyRounded) {
  // A double result rounded to float is the correctly rounded float result
  // for +, -, *, / and sqrt (double has more than 2 * 24 + 2 bits).
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float a = std::bit_cast<float>(bits(rng)), b = std::bit_cast<float>(bits(rng));
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const double da = a, db = b;
    ASSERT_EQ(eval(Op::add, a, b), static_cast<float>(da + db)) << a << " + " << b;
    ASSERT_EQ(eval(Op::sub, a, b), static_cast<float>(da - db)) << a << " - " << b;
    ASSERT_EQ(eval(Op::mul, a, b), static_cast<float>(da * db)) << a << " * " << b;
    if (b != 0) {
      ASSERT_EQ(eval(Op::div, a, b), static_cast<float>(da / db)) << a << " / " << b;
    }
    if (a >= 0) {
      ASSERT_EQ(eval(Op::sqrt, a), static_cast<float>(std::sqrt(da))) << "sqrt " << a;
    }
    ++checked;
  }
  EXPECT_GT(checked, 150000);
  EXPECT_EQ(eval(Op::div, 1.0f, 0.0f), kInf);
  EXPECT_TRUE(std::isnan(eval(Op::div, 0.0f, 0.0f)));
  EXPECT_TRUE(std::isnan(eval(Op::add, kInf, -kInf)));
}

TEST(ScalarFormulas, ConstantReadsItsValueAttribute) {
  EXPECT_EQ(evalScalarF32(Op::constant, {}, {{"value", 0.1}}), 0.1f) << "rounded to f32";
  EXPECT_EQ(evalScalarF32(Op::constant, {}, {{"value", int64_t{3}}}), 3.0f);
  try {
    evalScalarF32(Op::constant, {}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "constant: missing attribute 'value'");
  }
}

TEST(ScalarFormulas, FusionHasNoScalarFormula) {
  const float in[] = {1.0f};
  EXPECT_THROW(evalScalarF32(Op::fusion, in), InternalError);
}

}  // namespace
}  // namespace kiln::ir
