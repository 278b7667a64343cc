// Eager ops on every dtype: results against the C++ evaluator bit for bit
// (after the promotion casts), f16/bf16 rounding of known values, cast
// corner cases through to(), integer wraparound, comparisons with NaN,
// where with broadcasting, clamp, factories and accessors of every dtype,
// traced mixed-dtype functions against eager, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "frontend/promotion.h"
#include "ir/scalar_eval.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;
using ir::Op;
using ir::ScalarValue;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// Element i of an eager tensor, as the evaluator takes it.
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

/// A tensor of `dtype` from doubles (converted as `cast` converts an f64).
Tensor of(DType dtype, const std::vector<double>& values) { return fromVector(values).to(dtype); }

const std::vector<double> kFloats = {-3.5, -1, -0.0, 0,    1e-6,  1.0 / 3,  0.5,       1,
                                     2.5,  7,  88,   1000, 70000, INFINITY, -INFINITY, NAN};
const std::vector<double> kInts = {-7,    -1,    0,      1, 2, 3, 100, 2147483647, -2147483648.0,
                                   65536, 46341, -46341, 5, 6, 8, 9};

TEST(EagerDTypes, EveryOpOnEveryDTypeEqualsTheEvaluator) {
  using Fn1 = Tensor (*)(const Tensor&);
  using Fn2 = Tensor (*)(const Operand&, const Operand&);
  const std::vector<std::pair<Op, Fn1>> unary = {{Op::neg, neg},        {Op::relu, relu},       {Op::exp, kiln::exp},
                                                 {Op::log, kiln::log},  {Op::sqrt, kiln::sqrt}, {Op::tanh, kiln::tanh},
                                                 {Op::sigmoid, sigmoid}};
  const std::vector<std::pair<Op, Fn2>> binary = {
      {Op::add, add}, {Op::sub, sub}, {Op::mul, mul}, {Op::div, div}, {Op::maximum, maximum}, {Op::minimum, minimum},
      {Op::eq, eq},   {Op::ne, ne},   {Op::lt, lt},   {Op::le, le},   {Op::gt, gt},           {Op::ge, ge}};
  int checked = 0;
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    const bool isFloat = isFloatingPoint(d);
    std::vector<double> xs = isFloat ? kFloats : kInts, ys = xs;
    std::reverse(ys.begin(), ys.end());
    if (d == DType::boolean) xs = {0, 1, 0, 1}, ys = {0, 0, 1, 1};
    const Tensor x = of(d, xs), y = of(d, ys);
    // The reference: the promotion's casts, then the op, in the evaluator.
    auto reference = [&](Op op, std::vector<ScalarValue> in) {
      const DType to = detail::isFloatOnly(op) && !isFloat ? DType::f32 : d;
      for (ScalarValue& v : in) v = ir::evalScalar(Op::cast, std::vector<ScalarValue>{v}, {{"dtype", to}});
      return ir::evalScalar(op, in);
    };
    auto check = [&](Op op, const Tensor& got, std::vector<const Tensor*> in) {
      for (int64_t i = 0; i < got.numel(); ++i) {
        std::vector<ScalarValue> args;
        for (const Tensor* t : in) args.push_back(element(*t, i));
        const ScalarValue want = reference(op, args), have = element(got, i);
        ASSERT_TRUE(same(want, have)) << ir::opName(op) << " on " << dtypeName(d) << " at " << i << ": want "
                                      << want.toDouble() << ", got " << have.toDouble();
        ++checked;
      }
    };
    for (const auto& [op, fn] : unary) {
      if (d == DType::boolean && (op == Op::neg || op == Op::relu)) continue;  // errors, tested below
      check(op, fn(x), {&x});
    }
    for (const auto& [op, fn] : binary) {
      if (d == DType::boolean && (op == Op::add || op == Op::sub || op == Op::mul)) continue;
      check(op, fn(x, y), {&x, &y});
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(EagerDTypes, HalfAndBFloat16RoundEveryResult) {
  EXPECT_EQ((ones({1}, DType::f16) / 3).toVector<Half>()[0].bits, 0x3555);
  EXPECT_EQ((ones({1}, DType::bf16) / 3).toVector<BFloat16>()[0].bits, 0x3eab);
  EXPECT_EQ(full({1}, 65520, DType::f16).toVector<Half>()[0].bits, 0x7c00);
  EXPECT_EQ((full({1}, 300, DType::f16) * 300).item<Half>().bits, 0x7c00) << "90000 overflows f16";
  EXPECT_EQ((full({1}, 2048, DType::f16) + 1).item<Half>().bits, Half(2048.0f).bits) << "ties to even";
  EXPECT_EQ((full({1}, std::ldexp(1.0, -24), DType::f16) * 0.5).item<Half>().bits, 0x0000);
  EXPECT_EQ((full({1}, std::ldexp(1.0, -14), DType::f16) * 0.25).item<Half>().bits, 0x0100) << "a subnormal";
  // f16 * 0.1: the scalar is an f16 too (0.0999755859375), as the op's dtype.
  EXPECT_EQ((ones({1}, DType::f16) * 0.1).item<Half>().bits, Half(0.1f).bits);
}

TEST(EagerDTypes, CastCornerCases) {
  Tensor f = fromVector({kNaN, 1e10f, -1e10f, -0.0f, 2.9f, -2.9f, kInf});
  EXPECT_EQ(f.to(DType::i32).toVector<int32_t>(), (std::vector<int32_t>{0, INT32_MAX, INT32_MIN, 0, 2, -2, INT32_MAX}));
  EXPECT_EQ(f.to(DType::i64).toVector<int64_t>()[1], 10000000000);
  EXPECT_EQ(f.to(DType::boolean).toVector<bool>(), (std::vector<bool>{true, true, true, false, true, true, true}));
  EXPECT_EQ(fromVector(std::vector<bool>{true, false}).to(DType::f16).toVector<Half>()[0].bits, 0x3c00);
  EXPECT_EQ(fromVector(std::vector<int32_t>{16777217}).to(DType::f32).item(), 16777216.0f);
  EXPECT_EQ(fromVector(std::vector<int64_t>{(int64_t{1} << 32) + 9}).to(DType::i32).item<int32_t>(), 9);
  EXPECT_EQ(fromVector(std::vector<double>{1.0 / 3}).to(DType::bf16).item<BFloat16>().bits, 0x3eab);
  Tensor x = ones({3});
  EXPECT_EQ(x.to(DType::f32).impl(), x.impl()) << "to() the same dtype is the tensor itself";
}

TEST(EagerDTypes, IntegersWrap) {
  EXPECT_EQ((fromVector(std::vector<int32_t>{INT32_MAX, INT32_MIN}) + 1).toVector<int32_t>(),
            (std::vector<int32_t>{INT32_MIN, INT32_MIN + 1}));
  EXPECT_EQ((-fromVector(std::vector<int32_t>{INT32_MIN})).item<int32_t>(), INT32_MIN);
  EXPECT_EQ((fromVector(std::vector<int32_t>{65536}) * 65536).item<int32_t>(), 0);
  EXPECT_EQ((fromVector(std::vector<int64_t>{INT64_MAX}) + 1).item<int64_t>(), INT64_MIN);
  EXPECT_EQ((fromVector(std::vector<int64_t>{int64_t{1} << 62}) * 4).item<int64_t>(), 0);
  EXPECT_EQ(relu(fromVector(std::vector<int32_t>{-5, 5})).toVector<int32_t>(), (std::vector<int32_t>{0, 5}));
}

TEST(EagerDTypes, ComparisonsWithNaN) {
  Tensor a = fromVector({kNaN, 1, kNaN, -0.0f, 2}), b = fromVector({kNaN, kNaN, 1, 0.0f, 1});
  EXPECT_EQ((a == b).toVector<bool>(), (std::vector<bool>{false, false, false, true, false}));
  EXPECT_EQ((a != b).toVector<bool>(), (std::vector<bool>{true, true, true, false, true}));
  EXPECT_EQ((a < b).toVector<bool>(), (std::vector<bool>{false, false, false, false, false}));
  EXPECT_EQ((a >= b).toVector<bool>(), (std::vector<bool>{false, false, false, true, true}));
  EXPECT_EQ((a > 1.5).toVector<bool>(), (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(le(a.to(DType::f16), b.to(DType::bf16)).toVector<bool>(),
            (std::vector<bool>{false, false, false, true, false}));
  EXPECT_EQ((fromVector(std::vector<int32_t>{-1, 2}) < fromVector(std::vector<int64_t>{0, 2})).toVector<bool>(),
            (std::vector<bool>{true, false}));
}

TEST(EagerDTypes, WhereBroadcasts) {
  Tensor cond = fromVector(std::vector<bool>{true, false}, {2, 1});
  Tensor a = fromVector(std::vector<int32_t>{1, 2, 3});
  Tensor w = where(cond, a, -1);
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.dtype(), DType::i32);
  EXPECT_EQ(w.toVector<int32_t>(), (std::vector<int32_t>{1, 2, 3, -1, -1, -1}));
  Tensor v = where(cond, 0.5, fromVector({7, 8, 9}));
  EXPECT_EQ(v.toVector(), (std::vector<float>{0.5, 0.5, 0.5, 7, 8, 9}));
  EXPECT_TRUE(std::isnan(where(fromVector(std::vector<bool>{true}), kNaN, 1.0f).item()));
}

TEST(EagerDTypes, Clamp) {
  Tensor x = fromVector({-2, 0.5, 3, kNaN});
  std::vector<float> c = clamp(x, 0, 1).toVector();
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 0.5);
  EXPECT_EQ(c[2], 1);
  EXPECT_TRUE(std::isnan(c[3]));
  EXPECT_TRUE(std::isnan(clamp(fromVector({1}), kNaN, 2).item())) << "NaN bounds propagate";
  EXPECT_EQ(clamp(fromVector({5}), 3, 1).item(), 1) << "min > max gives max, as torch.clamp";
  Tensor i = clamp(fromVector(std::vector<int64_t>{-9, 4, 9}), 0.5, 7);
  EXPECT_EQ(i.dtype(), DType::f32);
  EXPECT_EQ(i.toVector(), (std::vector<float>{0.5, 4, 7}));
  EXPECT_EQ(clamp(fromVector(std::vector<int32_t>{-9, 9}), -1, 1).toVector<int32_t>(), (std::vector<int32_t>{-1, 1}));
}

TEST(EagerDTypes, FactoriesAndAccessorsOfEveryDType) {
  EXPECT_EQ(full({2}, 2.5, DType::f64).toVector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(full({2}, -7.9, DType::i32).toVector<int32_t>(), (std::vector<int32_t>{-7, -7}));
  EXPECT_EQ(full({2}, 1e30, DType::i64).toVector<int64_t>()[0], INT64_MAX);
  EXPECT_EQ(zeros({2}, DType::boolean).toVector<bool>(), (std::vector<bool>{false, false}));
  EXPECT_EQ(ones({1}, DType::bf16).item<BFloat16>().bits, 0x3f80);
  EXPECT_EQ(arange(0, 5, 2, DType::i64).toVector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(arange(3, DType::f16).toVector<Half>()[2].bits, 0x4000);
  EXPECT_EQ(arange(1, 2, 0.25, DType::f64).toVector<double>(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(fromVector(std::vector<double>{1, 2}, {2, 1}).shape(), (Shape{2, 1}));
  EXPECT_EQ(fromVector(std::vector<Half>{Half(1.0f), Half(0.5f)}).dtype(), DType::f16);
  EXPECT_EQ(fromVector(std::vector<bool>{true, false, true}).toVector<bool>(), (std::vector<bool>{true, false, true}));
  Tensor t = fromVector(std::vector<int64_t>{1, 2});
  t.data<int64_t>()[1] = 40;
  EXPECT_EQ(t.toVector<int64_t>()[1], 40);
  EXPECT_EQ(full({}, 3, DType::i32).item<int32_t>(), 3);
}

TEST(EagerDTypes, ScalarKernelsAreSharedPerDType) {
  Tensor i = fromVector(std::vector<int32_t>{1, 2, 3});
  (void)(i * 3);
  const auto before = detail::eagerStats();
  Tensor a = i * 5;  // another int scalar: the same executable
  EXPECT_EQ(detail::eagerStats().graphsBuilt, before.graphsBuilt);
  EXPECT_EQ(a.toVector<int32_t>(), (std::vector<int32_t>{5, 10, 15}));
  Tensor b = i * 0.5;  // a float scalar: f32, another executable (a cast and the mul, one kernel)
  const int64_t launches = runtime::kernelLaunchCount();
  Tensor c = i * 1.5;
  EXPECT_EQ(runtime::kernelLaunchCount() - launches, 1) << "the cast fuses with the mul";
  EXPECT_EQ(b.toVector(), (std::vector<float>{0.5, 1, 1.5}));
  EXPECT_EQ(c.toVector(), (std::vector<float>{1.5, 3, 4.5}));
}

TEST(EagerDTypes, CompiledMixedDTypesEqualEager) {
  auto fn = [](const Tensor& x, const Tensor& n, const Tensor& m) {
    Tensor h = kiln::exp(x.to(DType::f16) * 0.75) + n;  // f16 intermediates
    Tensor y = where(h > 2, h.to(DType::f32), x * 0.1);
    return std::vector<Tensor>{y, h, clamp(m + 3, -2, 5) < h};
  };
  Tensor x = randn({257}) * 3.0;
  Tensor n = arange(0, 257, 1, DType::i32) - 128;
  Tensor m = arange(-100, 157, 1, DType::i64);
  auto f = compile(fn);
  auto compiled = f(x, n, m);
  auto eager = fn(x, n, m);
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t k = 0; k < eager.size(); ++k) {
    ASSERT_EQ(compiled[k].type(), eager[k].type()) << k;
    for (int64_t i = 0; i < eager[k].numel(); ++i)
      ASSERT_TRUE(same(element(compiled[k], i), element(eager[k], i))) << "result " << k << " at " << i;
  }
  EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
}

TEST(EagerDTypes, Errors) {
  Tensor b = zeros({2}, DType::boolean), i = zeros({2}, DType::i32), x = zeros({2});
  EXPECT_EQ(errorOf([&] { add(b, b); }),
            "add: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu and bool[2]@cpu");
  EXPECT_EQ(errorOf([&] { relu(b); }),
            "relu: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu");
  EXPECT_EQ(errorOf([&] { i + (int64_t{1} << 40); }),
            "add: scalar 1099511627776 cannot be converted to i32 without overflow");
  EXPECT_EQ(errorOf([&] { where(x, x, x); }),
            "where: expected a bool condition, got f32[2]@cpu, f32[2]@cpu and f32[2]@cpu");
  EXPECT_EQ(errorOf([&] { x.toVector<double>(); }),
            "toVector: f32[2]@cpu holds float, not double (read it as float, or convert it with to())");
  EXPECT_EQ(errorOf([&] { i.item<int32_t>(); }), "item: expected a tensor with one element, got i32[2]@cpu");
  EXPECT_EQ(errorOf([&] { ones({1}, DType::f16).item(); }),
            "item: f16[1]@cpu holds kiln::Half, not float (read it as kiln::Half, or convert it with to())");
  EXPECT_EQ(errorOf([] { arange(0, 3, 1, DType::boolean); }), "arange: dtype bool is not supported");
  EXPECT_EQ(errorOf([&] { clamp(Tensor(), 0, 1); }), "clamp: argument 0 is an undefined tensor");
}

}  // namespace
