// The scalar formulas on every dtype through the C++ evaluator: cast corner
// cases, integer wraparound, comparisons with NaN, where, maximum/minimum on
// bool, f16/bf16 rounding after every op (the formula's rounding checked
// against runtime/numeric.h on a wide sweep), and evalScalarF32 unchanged.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "common/error_of.h"
#include "ir/scalar_eval.h"
#include "runtime/numeric.h"

namespace kiln::ir {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double cast(DType from, DType to, double v) {
  const double in[] = {v};
  return evalScalar(Op::cast, from, in, {{"dtype", to}});
}
double eval(Op op, DType d, std::initializer_list<double> in) {
  return evalScalar(op, d, std::span(in.begin(), in.size()));
}
ScalarValue evalInt(Op op, DType d, int64_t a, int64_t b) {
  const ScalarValue in[] = {ScalarValue::ofInt(d, a), ScalarValue::ofInt(d, b)};
  return evalScalar(op, in);
}

TEST(EvalDTypes, CastCornerCases) {
  EXPECT_EQ(cast(DType::f32, DType::i32, kNaN), 0.0);
  EXPECT_EQ(cast(DType::f32, DType::i32, 1e10), 2147483647.0);
  EXPECT_EQ(cast(DType::f32, DType::i32, -1e10), -2147483648.0);
  EXPECT_EQ(cast(DType::f64, DType::i32, -2.9), -2.0) << "toward zero";
  EXPECT_EQ(cast(DType::f16, DType::i64, 65504), 65504.0);
  EXPECT_EQ(cast(DType::f32, DType::boolean, -0.0), 0.0);
  EXPECT_EQ(cast(DType::f32, DType::boolean, kNaN), 1.0);
  EXPECT_EQ(cast(DType::f64, DType::boolean, 1e-300), 1.0);
  EXPECT_EQ(cast(DType::boolean, DType::f16, 1), 1.0);
  EXPECT_EQ(cast(DType::i32, DType::f32, 16777217), 16777216.0) << "to nearest even";
  EXPECT_EQ(cast(DType::i32, DType::f32, 16777219), 16777220.0);
  EXPECT_EQ(cast(DType::f64, DType::f16, 65520), INFINITY);
  EXPECT_EQ(cast(DType::f32, DType::bf16, 1.0 / 3), std::bit_cast<float>(0x3eab0000u));
  EXPECT_TRUE(std::isnan(cast(DType::f64, DType::f16, kNaN)));
  EXPECT_EQ(cast(DType::f16, DType::bf16, 1.0 / 3), static_cast<float>(BFloat16(static_cast<float>(Half(1.0f / 3)))));
  // f64 -> f16 goes through f32, as PyTorch's conversion does: 1 + 2^-11 +
  // 2^-40 rounds to the f32 tie 1 + 2^-11, which rounds to even: 1.
  EXPECT_EQ(cast(DType::f64, DType::f16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 1.0);
  // i64 -> i32 keeps the low 32 bits.
  const ScalarValue big[] = {ScalarValue::ofInt(DType::i64, (int64_t{1} << 32) + 7)};
  EXPECT_EQ(evalScalar(Op::cast, big, {{"dtype", DType::i32}}).i, 7);
}

TEST(EvalDTypes, IntegersWrap) {
  EXPECT_EQ(evalInt(Op::add, DType::i32, INT32_MAX, 1).i, INT32_MIN);
  EXPECT_EQ(evalInt(Op::sub, DType::i32, INT32_MIN, 1).i, INT32_MAX);
  EXPECT_EQ(evalInt(Op::mul, DType::i32, 65536, 65536).i, 0);
  EXPECT_EQ(evalInt(Op::mul, DType::i32, 46341, 46341).i, -2147479015);
  EXPECT_EQ(evalInt(Op::add, DType::i64, INT64_MAX, 1).i, INT64_MIN);
  EXPECT_EQ(evalInt(Op::mul, DType::i64, INT64_MIN, -1).i, INT64_MIN);
  const ScalarValue m[] = {ScalarValue::ofInt(DType::i32, INT32_MIN)};
  EXPECT_EQ(evalScalar(Op::neg, m).i, INT32_MIN);
  EXPECT_EQ(evalScalar(Op::relu, m).i, 0);
  EXPECT_EQ(evalInt(Op::maximum, DType::i64, -5, 3).i, 3);
  EXPECT_EQ(evalInt(Op::minimum, DType::i32, -5, 3).i, -5);
}

TEST(EvalDTypes, ComparisonsWithNaN) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    EXPECT_EQ(eval(Op::eq, d, {kNaN, kNaN}), 0.0);
    EXPECT_EQ(eval(Op::ne, d, {kNaN, kNaN}), 1.0);
    EXPECT_EQ(eval(Op::lt, d, {kNaN, 1}), 0.0);
    EXPECT_EQ(eval(Op::ge, d, {1, kNaN}), 0.0);
    EXPECT_EQ(eval(Op::le, d, {-0.0, 0.0}), 1.0);
    EXPECT_EQ(eval(Op::eq, d, {-0.0, 0.0}), 1.0);
    EXPECT_EQ(eval(Op::gt, d, {INFINITY, 60000}), 1.0);
  }
  EXPECT_EQ(evalInt(Op::lt, DType::i32, -1, 0).i, 1);
  EXPECT_EQ(evalInt(Op::gt, DType::i64, INT64_MIN, INT64_MAX).i, 0);
  EXPECT_EQ(eval(Op::gt, DType::boolean, {1, 0}), 1.0);
}

TEST(EvalDTypes, WhereAndBoolMaximumMinimum) {
  EXPECT_EQ(eval(Op::where, DType::i32, {1, 7, 9}), 7.0);
  EXPECT_EQ(eval(Op::where, DType::i32, {0, 7, 9}), 9.0);
  EXPECT_TRUE(std::isnan(eval(Op::where, DType::f64, {1, kNaN, 9})));
  for (int a : {0, 1})
    for (int b : {0, 1}) {
      EXPECT_EQ(eval(Op::maximum, DType::boolean, {double(a), double(b)}), double(a || b));
      EXPECT_EQ(eval(Op::minimum, DType::boolean, {double(a), double(b)}), double(a && b));
    }
}

TEST(EvalDTypes, HalfResultsAreRoundedAfterEveryOp) {
  EXPECT_EQ(eval(Op::div, DType::f16, {1, 3}), static_cast<float>(Half::fromBits(0x3555)));
  EXPECT_EQ(eval(Op::div, DType::bf16, {1, 3}), static_cast<float>(BFloat16::fromBits(0x3eab)));
  EXPECT_EQ(eval(Op::mul, DType::f16, {300, 300}), INFINITY) << "90000 overflows f16";
  EXPECT_EQ(eval(Op::add, DType::f16, {2048, 1}), 2048.0) << "2049 is a tie between 2048 and 2050";
  EXPECT_EQ(eval(Op::add, DType::f16, {2048, 3}), 2052.0);
  EXPECT_EQ(eval(Op::mul, DType::f16, {std::ldexp(1.0, -14), 0.5}), std::ldexp(1.0, -15)) << "subnormal";
  EXPECT_EQ(eval(Op::mul, DType::f16, {std::ldexp(1.0, -24), 0.5}), 0.0);
  EXPECT_EQ(eval(Op::exp, DType::f16, {1}), static_cast<float>(Half(evalScalarF32(Op::exp, std::vector<float>{1}))));
  EXPECT_EQ(evalScalar(Op::constant, DType::f16, {}, {{"value", 0.1}}), static_cast<float>(Half(0.1f)));
}

TEST(EvalDTypes, RoundingFormulaEqualsRuntimeConversion) {
  // cast f32 -> f16/bf16 runs the formula of ir/scalar_formulas_bits.h; the
  // tensor factories use runtime/numeric.cpp. Every f16 boundary region
  // and random bit patterns.
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  int n = 0;
  for (int k = 0; k < 1500000; ++k) {
    uint32_t u = bits(rng);
    if (k % 3 == 1) u = (u & 0xffffe000u) | (0x0ff8u + (u & 0xf));  // near an f16 tie
    if (k % 3 == 2) u = (u & 0x8fffffffu) | 0x30000000u;            // around the f16 range
    const float x = std::bit_cast<float>(u);
    const double h = cast(DType::f32, DType::f16, x), b = cast(DType::f32, DType::bf16, x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(h) && std::isnan(b));
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(h)), std::bit_cast<uint32_t>(static_cast<float>(Half(x))))
        << x;
    EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(b)), std::bit_cast<uint32_t>(static_cast<float>(BFloat16(x))))
        << x;
    ++n;
  }
  EXPECT_GT(n, 1000000);
}

TEST(EvalDTypes, EvalScalarF32IsUnchangedForF32Ops) {
  EXPECT_EQ(evalScalarF32(Op::add, std::vector<float>{1.5f, 2.25f}), 3.75f);
  EXPECT_EQ(evalScalarF32(Op::lt, std::vector<float>{1.0f, 2.0f}), 1.0f) << "bool results as 0 or 1";
  EXPECT_EQ(evalScalarF32(Op::cast, std::vector<float>{2.7f}, {{"dtype", DType::i32}}), 2.0f);
  EXPECT_EQ(evalScalarF32(Op::constant, {}, {{"value", 0.1}}), 0.1f);
}

TEST(EvalDTypes, RejectsWhatTheRegistryRejects) {
  EXPECT_EQ(errorOf([] { eval(Op::exp, DType::i32, {1}); }),
            "exp: expected a floating-point dtype (f32, f64, f16, bf16), got i32[]@cpu");
  EXPECT_EQ(errorOf([] { eval(Op::neg, DType::boolean, {1}); }),
            "neg: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[]@cpu");
}

}  // namespace
}  // namespace kiln::ir
