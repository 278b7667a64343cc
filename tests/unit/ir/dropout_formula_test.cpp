// The dropout formula (ir/scalar_formulas_random.h) and its registry rules:
// Philox spelled in builder operations gives Random123's known answers, the
// C++ evaluator's dropout equals a reference written with
// runtime::philox4x32_10 and uniformFromBits directly (Note [Dropout draws]),
// and the registry's type rules and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "common/error_of.h"
#include "ir/op_registry.h"
#include "ir/scalar_eval.h"
#include "ir/scalar_formulas_random.h"
#include "runtime/numeric.h"
#include "runtime/philox.h"

namespace kiln::ir {
namespace {

/// The integer part of a scalar-formula builder over uint64_t, enough for
/// formulas::philox4x32_10: what Note [Philox words in i64] relies on.
struct U64Builder {
  using V = uint64_t;
  V constant(double v, DType) { return static_cast<uint64_t>(v); }
  V mul(V a, V b) { return a * b; }
  V add(V a, V b) { return a + b; }
  V band(V a, V b) { return a & b; }
  V bxor(V a, V b) { return a ^ b; }
  V lshr(V a, int n) { return a >> n; }
};

TEST(DropoutFormula, PhiloxInBuilderOperationsGivesRandom123KnownAnswers) {
  // Random123 kat_vectors, philox4x32 10 (as tests/unit/runtime/philox_test.cpp).
  struct Kat {
    runtime::PhiloxCounter c;
    runtime::PhiloxKey k;
    runtime::PhiloxCounter want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  U64Builder b;
  for (const Kat& kat : kats) {
    const auto got = formulas::philox4x32_10(b, {kat.c[0], kat.c[1], kat.c[2], kat.c[3]}, {kat.k[0], kat.k[1]});
    for (int w = 0; w < 4; ++w) EXPECT_EQ(got[w], kat.want[w]) << "word " << w;
  }
}

uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

/// Whether dropout keeps element `i` of the draw (seed, offset), written
/// from the definition: uniformFromBits(word i % 4 of block i / 4) > p,
/// compared exactly.
bool referenceKeeps(uint64_t seed, uint64_t offset, uint64_t i, double p) {
  // Element i takes word i % 4 of the block of counter {i / 4, offset}.
  const auto r = runtime::philox4x32_10({lo(i / 4), hi(i / 4), lo(offset), hi(offset)}, {lo(seed), hi(seed)});
  return static_cast<double>(runtime::uniformFromBits(r[i % 4])) > p;
}

ScalarValue i64(uint64_t v) { return ScalarValue::ofInt(DType::i64, static_cast<int64_t>(v)); }

ScalarValue evalDropout(ScalarValue x, uint64_t seed, uint64_t offset, uint64_t i, double p) {
  const ScalarValue in[] = {x, i64(seed), i64(offset), i64(i)};
  return evalScalar(Op::dropout, in, {{"p", p}});
}

TEST(DropoutFormula, EvaluatorKeepsWhatTheReferenceKeepsAndScales) {
  std::mt19937_64 rng(3);
  // Seeds, offsets and indices with high words set too.
  const uint64_t seeds[] = {0, 42, 0xdeadbeef12345678ull, ~uint64_t{0}};
  const uint64_t offsets[] = {0, 1, 0x100000003ull, ~uint64_t{0} - 5};
  for (double p : {0.1, 0.5, 0.9, 1.0 / 3}) {
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    for (uint64_t seed : seeds)
      for (uint64_t offset : offsets)
        for (int k = 0; k < 64; ++k) {
          const uint64_t i = k < 32 ? static_cast<uint64_t>(k) : rng();
          const float x = static_cast<float>(k) - 20.5f;
          const ScalarValue got = evalDropout({DType::f32, x, 0}, seed, offset, i, p);
          const float want = referenceKeeps(seed, offset, i, p) ? x * scale : 0.0f;
          ASSERT_EQ(got.dtype, DType::f32);
          ASSERT_EQ(static_cast<float>(got.f), want) << "seed " << seed << " offset " << offset << " i " << i;
        }
  }
}

TEST(DropoutFormula, ThresholdIsExactlyUniformGreaterThanP) {
  // floor(p * 2^24) is where ((bits >> 8) + 1) / 2^24 > p starts to hold.
  for (double p : {0.0, 0.1, 0.5, 0.75, 1.0 / 3, 0.999999, 1.0, 5.9604644775390625e-08 /* 2^-24 */}) {
    const int64_t t = formulas::dropoutThreshold(p);
    auto uniformOfTop = [](int64_t top) {
      return static_cast<double>(runtime::uniformFromBits(static_cast<uint32_t>(top) << 8));
    };
    if (t > 0) {
      EXPECT_FALSE(uniformOfTop(t - 1) > p) << p;
    }
    if (t < (int64_t{1} << 24)) {
      EXPECT_TRUE(uniformOfTop(t) > p) << p;
    }
  }
  EXPECT_EQ(formulas::dropoutThreshold(0.0), 0);
  EXPECT_EQ(formulas::dropoutThreshold(1.0), int64_t{1} << 24);
}

TEST(DropoutFormula, ZeroKeepsEverythingOneDropsEverythingAndDroppedIsPlusZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (uint64_t i = 0; i < 200; ++i) {
    const ScalarValue kept = evalDropout({DType::f32, -0.0, 0}, 9, 4, i, 0.0);
    EXPECT_EQ(kept.f, 0.0);
    EXPECT_TRUE(std::signbit(kept.f)) << "p = 0 multiplies by 1: -0 stays -0";
    EXPECT_TRUE(std::isnan(evalDropout({DType::f32, nan, 0}, 9, 4, i, 0.0).f));
    const ScalarValue dropped = evalDropout({DType::f32, nan, 0}, 9, 4, i, 1.0);
    EXPECT_EQ(dropped.f, 0.0) << "p = 1 selects 0, even for NaN";
    EXPECT_FALSE(std::signbit(dropped.f));
    EXPECT_EQ(evalDropout({DType::f32, -INFINITY, 0}, 9, 4, i, 1.0).f, 0.0);
  }
}

TEST(DropoutFormula, HalfAndBFloat16ScaleInF32ThenRoundAndF64ScalesInF64) {
  const double p = 0.3;
  for (uint64_t i = 0; i < 400; ++i) {
    const bool keep = referenceKeeps(11, 2, i, p);
    const double x = 1.0 + static_cast<double>(i) / 7.0;
    for (DType d : {DType::f16, DType::bf16}) {
      const ScalarValue in = ScalarValue::of(d, x);
      const ScalarValue got = evalDropout(in, 11, 2, i, p);
      EXPECT_EQ(got.dtype, d);
      const double want = keep ? roundToDType(static_cast<float>(in.f) * static_cast<float>(1.0 / (1.0 - p)), d) : 0.0;
      EXPECT_EQ(got.f, want) << dtypeName(d) << " at " << i;
    }
    const ScalarValue got = evalDropout({DType::f64, x, 0}, 11, 2, i, p);
    EXPECT_EQ(got.f, keep ? x * (1.0 / (1.0 - p)) : 0.0);
  }
}

TEST(DropoutFormula, RegistryTypesAndErrors) {
  const TensorType x{DType::f32, {4, 8}, Device::cpu()}, s{DType::i64, {}, Device::cpu()};
  const Attributes attrs{{"p", 0.25}};
  EXPECT_EQ(inferType(Op::dropout, std::vector<TensorType>{x, s, s}, attrs), x);
  const TensorType h{DType::f16, {3}, Device::cpu()};
  EXPECT_EQ(inferType(Op::dropout, std::vector<TensorType>{h, s, s}, attrs), h);
  EXPECT_TRUE(usesElementIndex(Op::dropout));
  EXPECT_FALSE(usesElementIndex(Op::add));
  auto infer = [&](std::vector<TensorType> in, Attributes a) { return [=] { inferType(Op::dropout, in, a); }; };
  const TensorType xi{DType::i32, {4}, Device::cpu()}, s1{DType::i64, {1}, Device::cpu()},
      sf{DType::f32, {}, Device::cpu()};
  EXPECT_EQ(errorOf(infer({xi, s, s}, attrs)),
            "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got i32[4]@cpu, i64[]@cpu and i64[]@cpu");
  EXPECT_EQ(errorOf(infer({x, s1, s}, attrs)),
            "dropout: expected seed and offset of type i64[], got f32[4,8]@cpu, i64[1]@cpu and i64[]@cpu");
  EXPECT_EQ(errorOf(infer({x, s, sf}, attrs)),
            "dropout: expected seed and offset of type i64[], got f32[4,8]@cpu, i64[]@cpu and f32[]@cpu");
  EXPECT_EQ(errorOf(infer({x, s, s}, {{"p", 1.5}})), "dropout: p must be in [0, 1], got 1.5");
  EXPECT_EQ(errorOf(infer({x, s, s}, {{"p", -0.5}})), "dropout: p must be in [0, 1], got -0.5");
  EXPECT_EQ(errorOf(infer({x, s, s}, {{"p", std::nan("")}})), "dropout: p must be in [0, 1], got nan");
  EXPECT_EQ(errorOf(infer({x, s, s}, {})), "dropout: missing attribute 'p'");
  EXPECT_EQ(errorOf(infer({x, s}, attrs)), "dropout: expected 3 inputs, got 2");
  // The evaluator wants the element's index after the inputs.
  const ScalarValue three[] = {{DType::f32, 1.0, 0}, i64(1), i64(2)};
  EXPECT_EQ(errorOf([&] { evalScalar(Op::dropout, three, attrs); }),
            "dropout: expected 3 inputs and the element's index (i64), got 3 values");
}

}  // namespace
}  // namespace kiln::ir
