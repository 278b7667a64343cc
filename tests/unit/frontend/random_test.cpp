// kiln::rand and kiln::randn (frontend/random.h), random fills that are
// kernels of the `rand` and `randn` ops: the samples' distribution (moments,
// a Kolmogorov-Smirnov bound, tails) in f32 and f64; values pinned for a
// fixed seed and offset, held both to the C++ evaluator of the formula and
// to an independent computation (runtime::philox4x32_10 and Box-Muller in
// long double with the host libm); the LLVM kernel equal to the evaluator
// bit for bit on every element in every float dtype; the generator's
// advance, the eager capture inside kiln::compile, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "ir/scalar_eval.h"
#include "runtime/numeric.h"
#include "runtime/philox.h"

namespace kiln {
namespace {

/// The evaluator's element `i` of `op` (rand or randn) in `dtype`.
double evaluated(ir::Op op, DType dtype, int64_t seed, int64_t offset, int64_t i) {
  const std::vector<ir::ScalarValue> in = {ir::ScalarValue::ofInt(DType::i64, seed),
                                           ir::ScalarValue::ofInt(DType::i64, offset),
                                           ir::ScalarValue::ofInt(DType::i64, i)};
  return ir::evalScalar(op, in, {{"shape", Shape{}}, {"dtype", dtype}}).f;
}

/// Element `i` of a draw computed without kiln's formulas (Note [Random
/// fills]): Philox from runtime/philox.h, then the uniforms and Box-Muller
/// in long double with the host's libm.
long double reference(ir::Op op, DType dtype, uint64_t seed, uint64_t offset, uint64_t i) {
  const auto r = runtime::philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                                         static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                                        {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const bool f64 = dtype == DType::f64;
  auto top53 = [](uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 21) | (lo >> 11); };
  if (op == ir::Op::rand)
    return f64 ? std::ldexp(static_cast<long double>(top53(r[0], r[1])), -53)
               : std::ldexp(static_cast<long double>(r[0] >> 8), -24);
  const long double u1 = f64 ? std::ldexp(static_cast<long double>(top53(r[0], r[1]) + 1), -53)
                             : static_cast<long double>(runtime::uniformFromBits(r[0]));
  const long double u2 = f64 ? std::ldexp(static_cast<long double>(top53(r[2], r[3]) + 1), -53)
                             : static_cast<long double>(runtime::uniformFromBits(r[1]));
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi_v<long double> * u2);
}

/// The elements of `t` (f32, f64, f16 or bf16) as doubles.
std::vector<double> values(const Tensor& t) {
  if (t.dtype() == DType::f64) return t.toVector<double>();
  const std::vector<float> v = t.to(DType::f32).toVector();
  return {v.begin(), v.end()};
}

// Pinned: seed 20261201, offset 3. The values are the C++ evaluator's
// (ir::evalScalar of the formula), written here when the formula was; the
// test holds the kernel and the evaluator to them, and them to within one
// ulp of the independent reference above (exactly, for rand).
constexpr int64_t kSeed = 20261201, kOffset = 3;
struct Pin {
  ir::Op op;
  DType dtype;
  int64_t index;
  double value;
};
const Pin kPins[] = {
    {ir::Op::randn, DType::f32, 0, -0x1.d4321cp+0},
    {ir::Op::randn, DType::f32, 1, 0x1.772daap-1},
    {ir::Op::randn, DType::f32, 2, -0x1.394e16p-2},
    {ir::Op::randn, DType::f32, 777, 0x1.07bf3ep+0},
    {ir::Op::randn, DType::f32, 4294967301, -0x1.992e42p-1},  // the counter's high word is 1
    {ir::Op::randn, DType::f64, 0, -0x1.e2833d468eeccp+0},
    {ir::Op::randn, DType::f64, 1, 0x1.a79df0da40c2ep-1},
    {ir::Op::randn, DType::f64, 777, -0x1.13b5e7cc3a444p+0},
    {ir::Op::randn, DType::f64, 4294967301, 0x1.42c51a91cd8cfp-1},
    {ir::Op::rand, DType::f32, 0, 0x1.4792b8p-3},
    {ir::Op::rand, DType::f32, 777, 0x1.1a7fc4p-1},
    {ir::Op::rand, DType::f32, 4294967301, 0x1.df02ep-2},
    {ir::Op::rand, DType::f64, 0, 0x1.4792b9bc61ea4p-3},
    {ir::Op::rand, DType::f64, 777, 0x1.1a7fc4bc1b38cp-1},
};

TEST(Random, PinnedValuesOfTheFormula) {
  for (const Pin& p : kPins) {
    SCOPED_TRACE(std::string(ir::opName(p.op)) + " " + std::string(dtypeName(p.dtype)) + " element " +
                 std::to_string(p.index));
    EXPECT_EQ(evaluated(p.op, p.dtype, kSeed, kOffset, p.index), p.value);
    const long double ref = reference(p.op, p.dtype, kSeed, kOffset, static_cast<uint64_t>(p.index));
    if (p.op == ir::Op::rand) {
      EXPECT_EQ(static_cast<long double>(p.value), ref);
    } else {
      const double ulp =
          p.dtype == DType::f64 ? std::ldexp(std::fabs(p.value), -52) : std::ldexp(std::fabs(p.value), -23);
      EXPECT_LE(std::fabs(static_cast<double>(static_cast<long double>(p.value) - ref)), ulp) << "not Box-Muller";
    }
    // The kernel: a draw at this seed and offset, large enough for the index.
    if (p.index >= 1000) continue;
    Generator gen(kSeed);
    gen.setOffset(kOffset);
    const Tensor t = p.op == ir::Op::rand ? rand({1000}, p.dtype, gen) : randn({1000}, p.dtype, gen);
    EXPECT_EQ(values(t)[static_cast<size_t>(p.index)], p.value);
  }
}

TEST(Random, KernelEqualsTheEvaluatorOnEveryElementAndDType) {
  const Shape shape{3, 12347};  // not a multiple of any vector width
  for (ir::Op op : {ir::Op::rand, ir::Op::randn})
    for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::string(ir::opName(op)) + " " + std::string(dtypeName(d)));
      Generator gen(0xfeedbeefcafef00dull);
      gen.setOffset(0x123456789ull);
      const int64_t seed = static_cast<int64_t>(gen.seed()), offset = static_cast<int64_t>(gen.offset());
      const std::vector<double> got = values(op == ir::Op::rand ? rand(shape, d, gen) : randn(shape, d, gen));
      ASSERT_EQ(got.size(), 3u * 12347u);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], evaluated(op, d, seed, offset, static_cast<int64_t>(i))) << "element " << i;
      EXPECT_EQ(gen.offset(), static_cast<uint64_t>(offset) + 1) << "one advance per fill";
    }
}

TEST(Random, Half16AndBFloat16AreTheF32SamplesRoundedOrTruncated) {
  Generator a(5), b(5);
  const std::vector<float> f32 = randn({4096}, a).toVector();
  const std::vector<double> f16 = values(randn({4096}, DType::f16, b));
  for (size_t i = 0; i < f32.size(); ++i) ASSERT_EQ(f16[i], static_cast<float>(Half(f32[i]))) << i;
  Generator c(6), e(6);
  const std::vector<float> u = rand({4096}, c).toVector();
  const std::vector<double> ub = values(rand({4096}, DType::bf16, e));
  for (size_t i = 0; i < u.size(); ++i) {
    ASSERT_EQ(ub[i], std::ldexp(std::floor(std::ldexp(u[i], 8)), -8)) << "bf16 keeps the top 8 bits: " << i;
    ASSERT_LT(ub[i], 1.0);
  }
}

/// The standard normal distribution function.
double phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// sqrt(n) D, D the Kolmogorov-Smirnov distance between the samples and
/// distribution function `cdf`; below 1.95 with probability 0.999.
template <class Cdf>
double ksStatistic(std::vector<double> x, Cdf cdf) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, std::fabs(f - static_cast<double>(i) / n), std::fabs(static_cast<double>(i + 1) / n - f)});
  }
  return std::sqrt(n) * d;
}

TEST(Random, RandnIsStandardNormal) {
  for (DType d : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    const int64_t n = 1 << 20;
    Generator gen(2026);
    const std::vector<double> z = values(randn({n}, d, gen));
    double sum = 0, sq = 0, quad = 0;
    int64_t beyond2 = 0, beyond3 = 0, beyond4 = 0;
    for (double v : z) {
      sum += v, sq += v * v, quad += v * v * v * v;
      beyond2 += std::fabs(v) > 2, beyond3 += std::fabs(v) > 3, beyond4 += std::fabs(v) > 4;
    }
    const double N = static_cast<double>(n), mean = sum / N, var = sq / N - mean * mean;
    // Five standard errors: mean 1/sqrt(n), variance sqrt(2/n), fourth moment sqrt(96/n).
    EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(N));
    EXPECT_NEAR(var, 1.0, 5 * std::sqrt(2 / N));
    EXPECT_NEAR(quad / N, 3.0, 5 * std::sqrt(96 / N));
    EXPECT_LT(ksStatistic(z, phi), 1.95);
    // Tails: the fraction beyond 2, 3, 4 sigma, within five standard errors.
    for (auto [count, k] : {std::pair{beyond2, 2.0}, std::pair{beyond3, 3.0}, std::pair{beyond4, 4.0}}) {
      const double p = 2 * phi(-k);
      EXPECT_NEAR(static_cast<double>(count) / N, p, 5 * std::sqrt(p * (1 - p) / N)) << "beyond " << k;
    }
    // The largest |z| the uniforms allow: sqrt(-2 log 2^-24) = 5.77 (f32), 8.57 (f64).
    const auto [lo, hi] = std::minmax_element(z.begin(), z.end());
    EXPECT_LE(std::max(-*lo, *hi), d == DType::f64 ? 8.58 : 5.77);
  }
}

TEST(Random, RandIsUniformInZeroOne) {
  for (DType d : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    const int64_t n = 1 << 20;
    Generator gen(77);
    const std::vector<double> u = values(rand({n}, d, gen));
    const double N = static_cast<double>(n);
    double sum = 0, sq = 0;
    for (double v : u) {
      ASSERT_GE(v, 0.0);
      ASSERT_LT(v, 1.0);
      if (d == DType::f32) {
        ASSERT_EQ(v, std::ldexp(std::floor(std::ldexp(v, 24)), -24)) << "a multiple of 2^-24";
      }
      sum += v, sq += v * v;
    }
    EXPECT_NEAR(sum / N, 0.5, 5 * std::sqrt(1 / (12 * N)));
    EXPECT_NEAR(sq / N - (sum / N) * (sum / N), 1.0 / 12, 5 * std::sqrt(1 / (180 * N)));
    EXPECT_LT(ksStatistic(u, [](double v) { return v; }), 1.95);
  }
}

TEST(Random, ShapesAndTheGenerator) {
  Generator gen(9);
  EXPECT_EQ(randn({}, gen).dim(), 0);
  EXPECT_EQ(randn({2, 0, 3}, gen).numel(), 0);
  EXPECT_EQ(randn({2, 3}, DType::f64, gen).dtype(), DType::f64);
  EXPECT_EQ(gen.offset(), 3u) << "one advance per fill, empty ones included";
  // A copy of a generator shares its state; the same state draws the same values.
  Generator copy = gen;
  const std::vector<float> a = rand({100}, copy).toVector();
  gen.setOffset(3);
  EXPECT_EQ(rand({100}, gen).toVector(), a);
}

TEST(Random, InsideCompileAFillIsMadeOnceAndCaptured) {
  Generator gen(11);
  auto f = compile([&gen](const Tensor& x) { return x + randn({4}, gen); });
  const Tensor x = zeros({4});
  const std::vector<float> first = f(x).toVector(), second = f(x).toVector();
  EXPECT_EQ(first, second) << "the fill is a constant input of the program";
  EXPECT_EQ(gen.offset(), 1u) << "drawn once, while tracing";
  Generator again(11);
  EXPECT_EQ(first, randn({4}, again).toVector());
}

TEST(Random, ErrorsNameTheFillAndLeaveTheGeneratorAlone) {
  Generator gen(3);
  EXPECT_EQ(errorOf([&] { randn({2}, DType::i32, gen); }),
            "randn: expected a floating-point dtype (f32, f64, f16, bf16), got i32");
  EXPECT_EQ(errorOf([&] { rand({2, -1}, gen); }), "rand: negative dimension in shape [2,-1]");
  EXPECT_EQ(gen.offset(), 0u);
  // The IR rule says the same of a graph.
  const ir::TensorType i64{DType::i64, {}, Device::cpu()};
  EXPECT_EQ(errorOf([&] {
              ir::inferType(ir::Op::rand, std::vector{i64, i64}, {{"shape", Shape{2}}, {"dtype", DType::boolean}});
            }),
            "rand: expected a floating-point dtype (f32, f64, f16, bf16), got bool");
  EXPECT_EQ(errorOf([&] {
              ir::inferType(ir::Op::randn, std::vector{i64, ir::TensorType{DType::i32, {}, Device::cpu()}},
                            {{"shape", Shape{2}}, {"dtype", DType::f32}});
            }),
            "randn: expected seed and offset of type i64[], got i64[]@cpu and i32[]@cpu");
}

}  // namespace
}  // namespace kiln
