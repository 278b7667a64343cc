// The frontend of abs, rsqrt, sin, cos, erf, silu, gelu and pow: eager
// results on every dtype against the C++ evaluator (after the promotion
// casts), kiln::compile against eager bit for bit on f32, f64, f16 and bf16
// (alone and fused into one kernel), pow's broadcasting, scalars on either
// side and type promotion as PyTorch's, and the errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "frontend/promotion.h"
#include "ir/scalar_eval.h"

namespace {

using namespace kiln;
using ir::Op;
using ir::ScalarValue;

/// Element i of a contiguous tensor, as the evaluator takes it.
ScalarValue element(const Tensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.impl()->storage->hostData()) + i * itemSize(t.dtype());
  ScalarValue v;
  v.dtype = t.dtype();
  switch (t.dtype()) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      v.f = f;
      break;
    }
    case DType::f64: std::memcpy(&v.f, p, 8); break;
    case DType::f16: {
      Half h;
      std::memcpy(&h, p, 2);
      v.f = static_cast<float>(h);
      break;
    }
    case DType::bf16: {
      BFloat16 h;
      std::memcpy(&h, p, 2);
      v.f = static_cast<float>(h);
      break;
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      v.i = x;
      break;
    }
    case DType::i64: std::memcpy(&v.i, p, 8); break;
    case DType::boolean: v.i = *p != 0; break;
  }
  return v;
}

bool same(const ScalarValue& a, const ScalarValue& b) {
  if (a.dtype != b.dtype) return false;
  if (!isFloatingPoint(a.dtype)) return a.i == b.i;
  return std::bit_cast<uint64_t>(a.f) == std::bit_cast<uint64_t>(b.f) || (std::isnan(a.f) && std::isnan(b.f));
}

/// The raw bytes of a tensor, for bit-for-bit comparisons.
std::vector<uint8_t> bytesOf(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.impl()->storage->hostData()) + c.storageOffset() * itemSize(c.dtype());
  return {p, p + c.numel() * itemSize(c.dtype())};
}

Tensor of(DType dtype, const std::vector<double>& values) { return fromVector(values).to(dtype); }

const std::vector<double> kFloats = {-1e4, -30, -7.5, -3.5, -1,  -0.5, -0.0, 0,        1e-6,      1.0 / 3, 0.5,
                                     1,    2.5, 7,    88,   1e6, 3e9,  1e20, INFINITY, -INFINITY, NAN};
const std::vector<double> kInts = {-7, -2, -1, 0, 1, 2, 3, 5, 31, 62, 100, 46341, 2147483647, -2147483648.0};

struct Unary {
  Op op;
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  ir::Attributes attrs;
};
const std::vector<Unary> kUnary = {
    {Op::abs, "abs", [](const Tensor& x) { return kiln::abs(x); }, {}},
    {Op::rsqrt, "rsqrt", [](const Tensor& x) { return rsqrt(x); }, {}},
    {Op::sin, "sin", [](const Tensor& x) { return kiln::sin(x); }, {}},
    {Op::cos, "cos", [](const Tensor& x) { return kiln::cos(x); }, {}},
    {Op::erf, "erf", [](const Tensor& x) { return kiln::erf(x); }, {}},
    {Op::silu, "silu", [](const Tensor& x) { return silu(x); }, {}},
    {Op::gelu, "gelu", [](const Tensor& x) { return gelu(x); }, {{"approximate", int64_t{0}}}},
    {Op::gelu, "gelu tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, {{"approximate", int64_t{1}}}},
};

TEST(MathOps, EagerOnEveryDTypeEqualsTheEvaluator) {
  int checked = 0;
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    const bool isFloat = isFloatingPoint(d);
    std::vector<double> xs = isFloat ? kFloats : kInts;
    if (d == DType::boolean) xs = {0, 1};
    std::vector<double> ys(xs.rbegin(), xs.rend());
    if (!isFloat && d != DType::boolean) ys = {0, 1, 2, 3, 5, 7, 31, 32, 63, 64, -1, -2, -3, 30};
    const Tensor x = of(d, xs), y = of(d, ys);
    auto check = [&](Op op, const ir::Attributes& attrs, const Tensor& got, std::vector<const Tensor*> in) {
      // The promotion's casts (sin of i32 is f32), then the op, in the evaluator.
      const DType to = detail::isFloatOnly(op) && !isFloat ? DType::f32 : d;
      ASSERT_EQ(got.dtype(), to) << ir::opName(op) << " on " << dtypeName(d);
      for (int64_t i = 0; i < got.numel(); ++i) {
        std::vector<ScalarValue> args;
        for (const Tensor* t : in)
          args.push_back(ir::evalScalar(Op::cast, std::vector<ScalarValue>{element(*t, i)}, {{"dtype", to}}));
        const ScalarValue want = ir::evalScalar(op, args, attrs), have = element(got, i);
        ASSERT_TRUE(same(want, have)) << ir::opName(op) << " on " << dtypeName(d) << " at " << i << ": want "
                                      << want.toDouble() << ", got " << have.toDouble();
        ++checked;
      }
    };
    for (const Unary& u : kUnary) {
      if (d == DType::boolean && u.op == Op::abs) continue;  // an error, below
      check(u.op, u.attrs, u.fn(x), {&x});
    }
    if (d != DType::boolean) check(Op::pow, {}, kiln::pow(x, y), {&x, &y});
  }
  EXPECT_GT(checked, 800);
}

/// n values of `dtype` that exercise every formula: random ones over several
/// magnitudes and signs, and the special ones.
Tensor testValues(DType dtype, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(kFloats);
  while (static_cast<int>(v.size()) < n) v.push_back(u(rng) * std::pow(10.0, static_cast<int>(rng() % 9) - 3));
  return of(dtype, v);
}

TEST(MathOps, CompiledEqualsEagerBitForBit) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtypeName(d)));
    const Tensor x = testValues(d, 3000, 1), y = testValues(d, 3000, 2);
    for (const Unary& u : kUnary) {
      auto compiled = compile([&](const Tensor& t) { return u.fn(t); });
      EXPECT_EQ(bytesOf(compiled(x)), bytesOf(u.fn(x))) << u.name;
    }
    auto pow2 = compile([](const Tensor& a, const Tensor& b) { return kiln::pow(a, b); });
    EXPECT_EQ(bytesOf(pow2(x, y)), bytesOf(kiln::pow(x, y))) << "pow";
    auto powScalar = compile([](const Tensor& a) { return kiln::pow(a, 2.5); });
    EXPECT_EQ(bytesOf(powScalar(x)), bytesOf(kiln::pow(x, 2.5))) << "pow(x, 2.5)";
    auto scalarPow = compile([](const Tensor& a) { return kiln::pow(0.75, a); });
    EXPECT_EQ(bytesOf(scalarPow(x)), bytesOf(kiln::pow(0.75, x))) << "pow(0.75, x)";
    // Every new op in one fused kernel: each op rounds to f16/bf16 as in eager.
    auto chain = [](const Tensor& a, const Tensor& b) {
      Tensor t = gelu(a) + gelu(b, "tanh") * silu(a);
      t = kiln::sin(t) + kiln::cos(a) * kiln::erf(b);
      return kiln::pow(kiln::abs(t) + rsqrt(kiln::abs(b) + 1.0), b);
    };
    auto fused = compile(chain);
    EXPECT_EQ(bytesOf(fused(x, y)), bytesOf(chain(x, y))) << "the chain";
    EXPECT_EQ(fused.lastNumKernels(), 1);
  }
}

TEST(MathOps, IntegerPowCompiledEqualsEager) {
  for (DType d : {DType::i32, DType::i64}) {
    const Tensor x = of(d, kInts), y = of(d, {0, 1, 2, 3, 5, 7, 31, 32, 63, 64, -1, -2, -3, 30});
    auto f = compile([](const Tensor& a, const Tensor& b) { return kiln::pow(a, b) + kiln::abs(a); });
    EXPECT_EQ(bytesOf(f(x, y)), bytesOf(kiln::pow(x, y) + kiln::abs(x))) << dtypeName(d);
  }
}

TEST(MathOps, PowBroadcastsAndPromotesAsPyTorch) {
  const Tensor a = fromVector({1, 2, 3, 4, 5, 6}, {2, 3}), b = fromVector({0, 1, 2}, {3});
  EXPECT_EQ(kiln::pow(a, b).toVector(), (std::vector<float>{1, 2, 9, 1, 5, 36}));
  const Tensor col = fromVector({2, 3}, {2, 1}), row = fromVector({1, 2, 3}, {1, 3});
  Tensor p = kiln::pow(col, row);
  EXPECT_EQ(p.shape(), (Shape{2, 3}));
  EXPECT_EQ(p.toVector(), (std::vector<float>{2, 4, 8, 3, 9, 27}));
  EXPECT_EQ(kiln::pow(2.0, b).toVector(), (std::vector<float>{1, 2, 4}));
  EXPECT_EQ(kiln::pow(b, 3).toVector(), (std::vector<float>{0, 1, 8}));
  // Promotion: i32 ^ int stays i32, i32 ^ float is f32, int ^ i32 is i32,
  // f16 ^ float stays f16, i32 ^ f64[] is f64, i64[] ^ f32 is f32.
  const Tensor i = fromVector<int32_t>({2, 3}, {2});
  EXPECT_EQ(kiln::pow(i, 2).dtype(), DType::i32);
  EXPECT_EQ(kiln::pow(i, 2).toVector<int32_t>(), (std::vector<int32_t>{4, 9}));
  EXPECT_EQ(kiln::pow(i, 0.5).dtype(), DType::f32);
  EXPECT_EQ(kiln::pow(2, i).dtype(), DType::i32);
  EXPECT_EQ(kiln::pow(2, i).toVector<int32_t>(), (std::vector<int32_t>{4, 8}));
  EXPECT_EQ(kiln::pow(2.5, i).dtype(), DType::f32);
  EXPECT_EQ(kiln::pow(i, -1.0).toVector(), (std::vector<float>{0.5f, 1.0f / 3}));
  EXPECT_EQ(kiln::pow(ones({2}, DType::f16), 2.0).dtype(), DType::f16);
  EXPECT_EQ(kiln::pow(i, full({}, 2.0, DType::f64)).dtype(), DType::f64);
  EXPECT_EQ(kiln::pow(full({}, 2.0, DType::i64), fromVector({1, 2})).dtype(), DType::f32);
  EXPECT_EQ(kiln::pow(fromVector<bool>({true, false}, {2}), 2).dtype(), DType::i64) << "bool ^ int is i64";
  // An integer tensor exponent may be negative (ATen's powi: 1, +-1, else 0).
  const Tensor base = fromVector<int64_t>({1, -1, -1, 2, 0}, {5}),
               exponent = fromVector<int64_t>({-5, -3, -4, -1, -2}, {5});
  EXPECT_EQ(kiln::pow(base, exponent).toVector<int64_t>(), (std::vector<int64_t>{1, -1, 1, 0, 0}));
}

TEST(MathOps, UnaryOpsPromoteIntegersToF32) {
  const Tensor i = fromVector<int32_t>({-2, 0, 3}, {3});
  for (const Unary& u : kUnary) {
    if (u.op == Op::abs) continue;
    SCOPED_TRACE(u.name);
    const Tensor got = u.fn(i);
    EXPECT_EQ(got.dtype(), DType::f32);
    EXPECT_EQ(bytesOf(got), bytesOf(u.fn(i.to(DType::f32)))) << "the op of the f32 values, as exp of i32";
  }
  EXPECT_EQ(kiln::abs(i).dtype(), DType::i32);
  EXPECT_EQ(kiln::abs(i).toVector<int32_t>(), (std::vector<int32_t>{2, 0, 3}));
  EXPECT_EQ(kiln::sin(fromVector<bool>({true}, {1})).dtype(), DType::f32);
}

TEST(MathOps, Errors) {
  const Tensor flags = fromVector<bool>({true, false}, {2});
  EXPECT_EQ(errorOf([&] { kiln::abs(flags); }),
            "abs: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu");
  EXPECT_EQ(errorOf([&] { kiln::pow(flags, flags); }),
            "pow: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu and bool[2]@cpu");
  const Tensor i = fromVector<int32_t>({2, 3}, {2});
  EXPECT_EQ(errorOf([&] { kiln::pow(i, -1); }),
            "pow: integers to negative integer powers are not allowed, got i32[2]@cpu ^ -1");
  EXPECT_EQ(errorOf([&] { kiln::pow(flags, -2); }),
            "pow: integers to negative integer powers are not allowed, got bool[2]@cpu ^ -2");
  EXPECT_EQ(errorOf([&] { kiln::pow(2, 3); }), "pow: expected at least one tensor, got two scalars");
  EXPECT_EQ(errorOf([&] {
              kiln::pow(fromVector({1, 2, 3}), fromVector({1, 2}));
            }),
            "pow: shapes do not broadcast, got f32[3]@cpu and f32[2]@cpu");
  EXPECT_EQ(errorOf([] { gelu(ones({2}), "erf"); }), "gelu: approximate must be 'none' or 'tanh', got 'erf'");
  EXPECT_EQ(errorOf([] { kiln::pow(fromVector<int32_t>({2}, {1}), int64_t{1} << 40); }),
            "pow: scalar 1099511627776 cannot be converted to i32 without overflow");
}

}  // namespace
