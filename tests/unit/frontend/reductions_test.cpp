// Eager and compiled reductions (frontend/reductions.h): values against
// plain C++ references in double or long double, with the tolerances
// docs/ops.md derives ("Reductions"); exact results where they must be
// (amax, amin, argmax, integer sums, sums of small integers); NaN, empty
// rows, keepdim shapes, negative dims, reduced dims that are not
// contiguous; compiled equal to eager bit for bit; and the exact errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool sameBits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (a != a && b != b);
}

void expectSameBits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.type(), b.type()) << what;
  if (a.dtype() == DType::i64) {
    EXPECT_EQ(a.toVector<int64_t>(), b.toVector<int64_t>()) << what;
    return;
  }
  auto x = a.to(DType::f32).toVector(), y = b.to(DType::f32).toVector();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(sameBits(x[i], y[i])) << what << " element " << i;
}

/// Uniform integers in [-50, 50] as f32: their sums are exact in f32.
Tensor smallIntegers(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-50, 50);
  std::vector<float> v(static_cast<size_t>(ir::numel(shape)));
  for (float& f : v) f = static_cast<float>(dist(rng));
  return fromVector(v, shape);
}

TEST(Reductions, SumOfAMillionFloatsIsWithinTheDerivedBound) {
  // Bound (docs/ops.md): f32 inputs add up in f64 in W partial sums, error
  // <= (n/W + log2 W + 1) 2^-53 sum|x| <= (n + 1) 2^-53 sum|x| for any W,
  // plus the final rounding to f32, 2^-24 |sum|.
  const int64_t n = 1 << 20;
  Generator gen(5);
  Tensor x = randn({n}, gen);
  const float* p = x.data<float>();
  long double exact = 0, absSum = 0;
  for (int64_t i = 0; i < n; ++i) {
    exact += p[i];
    absSum += std::fabs(p[i]);
  }
  const double bound = std::ldexp(1.0, -24) * std::fabs(static_cast<double>(exact)) +
                       static_cast<double>(n + 1) * std::ldexp(1.0, -53) * static_cast<double>(absSum);
  const float got = kiln::sum(x).item();
  EXPECT_LE(std::fabs(got - static_cast<double>(exact)), bound) << "sum " << got << ", exact " << (double)exact;
  // In practice f64 partial sums leave only the final rounding.
  EXPECT_LE(std::fabs(got - static_cast<double>(exact)), std::ldexp(1.0, -24) * std::fabs((double)exact) * 1.0001);
  // mean is the same sum divided in f64.
  EXPECT_NEAR(kiln::mean(x).item(), static_cast<double>(exact / n),
              1e-7 * std::fabs(static_cast<double>(exact / n)) + 1e-12);
}

TEST(Reductions, ShapesWithKeepdimNegativeAndSeveralDims) {
  Tensor x = smallIntegers({2, 3, 4}, 1);
  EXPECT_EQ(kiln::sum(x, {1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(kiln::sum(x, {-1}, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(kiln::sum(x, {0, 2}).shape(), (Shape{3}));
  EXPECT_EQ(kiln::sum(x, {2, -3}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(kiln::sum(x).shape(), (Shape{}));
  EXPECT_EQ(kiln::sum(x, {}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(argmax(x, -2, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(argmax(x, 0).shape(), (Shape{3, 4}));
  // A 0-d tensor reduces over nothing, with dim 0 or -1.
  Tensor s = full({}, 3.0);
  EXPECT_EQ(kiln::sum(s, {0}).item(), 3.0f);
  EXPECT_EQ(argmax(s, -1).item<int64_t>(), 0);
}

TEST(Reductions, ExactValuesOverEveryChoiceOfDims) {
  const Shape shape = {3, 4, 5};
  Tensor x = smallIntegers(shape, 2);
  const std::vector<float> v = x.toVector();
  auto at = [&](int64_t i, int64_t j, int64_t k) { return v[static_cast<size_t>((i * 4 + j) * 5 + k)]; };
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {}}) {
    bool red[3] = {dims.empty(), dims.empty(), dims.empty()};
    for (int64_t d : dims) red[d] = true;
    auto s = kiln::sum(x, dims, true).toVector(), mx = amax(x, dims, true).toVector();
    auto mn = amin(x, dims, true).toVector();
    const int64_t n0 = red[0] ? 1 : 3, n1 = red[1] ? 1 : 4, n2 = red[2] ? 1 : 5;
    for (int64_t a = 0; a < n0; ++a)
      for (int64_t b = 0; b < n1; ++b)
        for (int64_t c = 0; c < n2; ++c) {
          float ws = 0, wmax = -kInf, wmin = kInf;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 4; ++j)
              for (int64_t k = 0; k < 5; ++k) {
                if ((!red[0] && i != a) || (!red[1] && j != b) || (!red[2] && k != c)) continue;
                ws += at(i, j, k);
                wmax = std::max(wmax, at(i, j, k));
                wmin = std::min(wmin, at(i, j, k));
              }
          const size_t o = static_cast<size_t>((a * n1 + b) * n2 + c);
          EXPECT_EQ(s[o], ws);
          EXPECT_EQ(mx[o], wmax);
          EXPECT_EQ(mn[o], wmin);
        }
  }
}

TEST(Reductions, ReducingDimZeroWalksTheColumns) {
  const int64_t R = 1000, C = 7;
  Tensor x = smallIntegers({R, C}, 3);
  const auto v = x.toVector();
  auto s = kiln::sum(x, {0}).toVector(), m = amax(x, {0}).toVector();
  auto idx = argmax(x, 0).toVector<int64_t>();
  for (int64_t c = 0; c < C; ++c) {
    float ws = 0, wm = -kInf;
    int64_t wi = 0;
    for (int64_t r = 0; r < R; ++r) {
      ws += v[r * C + c];
      if (v[r * C + c] > wm) wm = v[r * C + c], wi = r;
    }
    EXPECT_EQ(s[c], ws) << c;
    EXPECT_EQ(m[c], wm) << c;
    EXPECT_EQ(idx[c], wi) << c;
  }
}

TEST(Reductions, IntegersAndBool) {
  Tensor big = full({3, 1000}, 2147483647.0, DType::i32);
  Tensor s = kiln::sum(big, {1});
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.toVector<int64_t>(), std::vector<int64_t>(3, int64_t{2147483647} * 1000));
  Tensor b = fromVector<bool>({true, false, true, true, false, false}, {2, 3});
  EXPECT_EQ(kiln::sum(b, {1}).toVector<int64_t>(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(amax(b, {1}).toVector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(amin(b, {1}).toVector<bool>(), (std::vector<bool>{false, false}));
  Tensor i = fromVector<int64_t>({5, -9, 7, 7, -9, 0}, {2, 3});
  EXPECT_EQ(amax(i, {1}).toVector<int64_t>(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(amin(i, {0}).toVector<int64_t>(), (std::vector<int64_t>{5, -9, 0}));
  EXPECT_EQ(argmax(i, 1).toVector<int64_t>(), (std::vector<int64_t>{2, 0}));
}

TEST(Reductions, NanAndEmptyRows) {
  Tensor x = fromVector({1, kNan, 3, 2, 7, 7, kNan, 0, kNan}, {3, 3});
  auto m = amax(x, {1}).toVector();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 7.0f);
  EXPECT_TRUE(std::isnan(m[2]));
  EXPECT_TRUE(std::isnan(amin(x, {1}).toVector()[0]));
  EXPECT_EQ(argmax(x, 1).toVector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_TRUE(std::isnan(kiln::sum(x, {1}).toVector()[0]));
  // -0 < +0.
  EXPECT_FALSE(std::signbit(amax(fromVector({-0.0f, 0.0f, -0.0f})).item()));
  EXPECT_TRUE(std::signbit(amin(fromVector({0.0f, -0.0f, 0.0f})).item()));
  // Empty rows: sum 0, mean NaN, var NaN; an empty outer domain is fine.
  Tensor e = zeros({4, 0});
  EXPECT_EQ(kiln::sum(e, {1}).toVector(), std::vector<float>(4, 0.0f));
  for (float v : kiln::mean(e, {1}).toVector()) EXPECT_TRUE(std::isnan(v));
  for (float v : kiln::var(e, {1}).toVector()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(amax(e, {0}).shape(), (Shape{0}));
  EXPECT_EQ(kiln::sum(zeros({0})).item(), 0.0f);
}

TEST(Reductions, VarianceIsTwoPassAndStable) {
  // A large mean and a small spread: a one-pass sum of squares would lose it.
  const int64_t R = 3, C = 4097;
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 0.01f);
  std::vector<float> v(static_cast<size_t>(R * C));
  for (float& f : v) f = 10000.0f + dist(rng);
  Tensor x = fromVector(v, {R, C});
  for (int64_t correction : {0, 1, 2}) {
    auto got = kiln::var(x, {1}, correction).toVector();
    for (int64_t r = 0; r < R; ++r) {
      long double mean = 0, m2 = 0;
      for (int64_t c = 0; c < C; ++c) mean += v[r * C + c];
      mean /= C;
      for (int64_t c = 0; c < C; ++c) m2 += (v[r * C + c] - mean) * (v[r * C + c] - mean);
      const double want = static_cast<double>(m2 / (C - correction));
      EXPECT_NEAR(got[r], want, 1e-6 * want) << "correction " << correction;
    }
  }
  EXPECT_TRUE(std::isnan(kiln::var(fromVector({3.0f})).item()));  // n - correction = 0
  EXPECT_EQ(kiln::var(fromVector({3.0f}), {}, 0).item(), 0.0f);
}

TEST(Reductions, HalfPrecisionAccumulatesWide) {
  // 4096 ones in f16: an f16 accumulator would stop at 2048.
  Tensor h = ones({4096}, DType::f16);
  EXPECT_EQ(kiln::sum(h).dtype(), DType::f16);
  EXPECT_EQ(kiln::sum(h).to(DType::f32).item(), 4096.0f);
  EXPECT_EQ(kiln::mean(ones({3, 5000}, DType::bf16), {1}).to(DType::f32).toVector(), std::vector<float>(3, 1.0f));
}

TEST(Reductions, MaxGivesValuesAndIndices) {
  Tensor x = fromVector({3, 9, 9, 1, -2, 0}, {2, 3});
  auto [values, indices] = kiln::max(x, 1);
  EXPECT_EQ(values.toVector(), (std::vector<float>{9, 1}));
  EXPECT_EQ(indices.toVector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(Reductions, CompiledEqualsEagerBitForBit) {
  Generator gen(21);
  Tensor x = randn({64, 333}, gen);
  Tensor w = randn({333}, gen), b = randn({333}, gen);
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Fn>> cases = {
      {"sum", [](const Tensor& t) { return kiln::sum(t, {1}); }},
      {"sum_all", [](const Tensor& t) { return kiln::sum(t); }},
      {"sum_cols", [](const Tensor& t) { return kiln::sum(t, {0}, true); }},
      {"mean", [](const Tensor& t) { return kiln::mean(t, {-1}, true); }},
      {"amax", [](const Tensor& t) { return amax(t, {1}); }},
      {"amin", [](const Tensor& t) { return amin(t, {0}); }},
      {"argmax", [](const Tensor& t) { return argmax(t, 1); }},
      {"var", [](const Tensor& t) { return kiln::var(t, {1}); }},
      {"softmax", [](const Tensor& t) { return softmax(t, -1); }},
      {"log_softmax", [](const Tensor& t) { return logSoftmax(t, 1); }},
      {"layer_norm", [&](const Tensor& t) { return layerNorm(t, {333}, w, b); }},
  };
  for (const auto& [name, fn] : cases) {
    auto compiled = compile([fn](const Tensor& t) { return fn(t); });
    expectSameBits(compiled(x), fn(x), name);
  }
}

TEST(Reductions, KernelCounts) {
  Tensor x = randn({16, 128});
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> fn;
    int eager, compiled;
  };
  // Eagerly one kernel per op: softmax amax, sub, exp, sum, div;
  // log_softmax amax, sub, exp, sum, log, sub; layer_norm (weight, bias)
  // mean, sub, mul, mean, add, sqrt, div, mul, mul, add. Compiled,
  // fuse-reductions makes each one kernel over the rows.
  Tensor w = ones({128}), b = zeros({128});
  for (const Case& c : {Case{"softmax", [](const Tensor& t) { return softmax(t, 1); }, 5, 1},
                        Case{"log_softmax", [](const Tensor& t) { return logSoftmax(t, 1); }, 6, 1},
                        Case{"layer_norm", [&](const Tensor& t) { return layerNorm(t, {128}, w, b); }, 10, 1}}) {
    const int64_t before = runtime::kernelLaunchCount();
    c.fn(x);
    EXPECT_EQ(runtime::kernelLaunchCount() - before, c.eager) << c.name;
    auto f = compile([&c](const Tensor& t) { return c.fn(t); });
    f(x);
    EXPECT_EQ(f.lastNumKernels(), c.compiled) << c.name << "\n" << f.lastGraph();
  }
}

TEST(Reductions, SoftmaxAndLogSoftmaxValues) {
  const int64_t R = 7, C = 300;
  Generator gen(4);
  Tensor x = randn({R, C}, gen) * 5.0;
  const auto v = x.toVector();
  auto s = softmax(x, 1).toVector(), ls = logSoftmax(x, -1).toVector();
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, z = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(v[r * C + c]));
    for (int64_t c = 0; c < C; ++c) z += std::exp(v[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(v[r * C + c] - m) / z;
      EXPECT_NEAR(s[r * C + c], p, 2e-6 * p + 1e-30);
      EXPECT_NEAR(ls[r * C + c], std::log(p), 2e-6 * std::fabs(std::log(p)) + 1e-6);
    }
  }
  // -inf entries get 0; a row of -inf only is NaN, as in PyTorch.
  auto t = softmax(fromVector({0, -kInf, 0, -kInf, -kInf, -kInf}, {2, 3}), 1).toVector();
  EXPECT_EQ(t[0], 0.5f);
  EXPECT_EQ(t[1], 0.0f);
  EXPECT_TRUE(std::isnan(t[3]));
  // f16 in, f16 out, computed in f32.
  Tensor h = softmax(fromVector({1, 2, 3}).to(DType::f16), 0);
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_NEAR(h.to(DType::f32).toVector()[2], 0.66524096, 1e-3);
  EXPECT_EQ(softmax(zeros({2, 0}), 1).shape(), (Shape{2, 0}));
}

TEST(Reductions, LayerNormAndItsStatistics) {
  const int64_t R = 5, C = 64;
  Generator gen(8);
  Tensor x = randn({R, 2, C / 2}, gen) * 3.0 + 100.0;
  Tensor w = randn({2, C / 2}, gen), b = randn({2, C / 2}, gen);
  LayerNormResult out = layerNormWithStats(x, {2, C / 2}, w, b, 1e-5);
  EXPECT_EQ(out.output.shape(), (Shape{R, 2, C / 2}));
  EXPECT_EQ(out.mean.shape(), (Shape{R, 1, 1}));
  EXPECT_EQ(out.rstd.shape(), (Shape{R, 1, 1}));
  const auto v = x.toVector(), wv = w.toVector(), bv = b.toVector(), y = out.output.toVector();
  for (int64_t r = 0; r < R; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mean += v[r * C + c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c) var += (v[r * C + c] - mean) * (v[r * C + c] - mean);
    var /= C;  // biased, as torch.layer_norm
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(out.mean.toVector()[r], mean, 1e-6 * mean);
    EXPECT_NEAR(out.rstd.toVector()[r], rstd, 1e-5 * rstd);
    for (int64_t c = 0; c < C; ++c) {
      const double want = (v[r * C + c] - mean) * rstd * wv[c] + bv[c];
      EXPECT_NEAR(y[r * C + c], want, 1e-4 * (std::fabs(want) + 1));
    }
  }
  EXPECT_EQ(layerNorm(x, {C / 2}).shape(), x.shape());
}

TEST(Reductions, Errors) {
  Tensor x = zeros({2, 3});
  EXPECT_EQ(errorOf([&] {
              kiln::sum(x, {0, 2});
            }),
            "sum: dim 2 of dims [0, 2] is out of range for f32[2,3]@cpu (expected dims in [-2, 1])");
  EXPECT_EQ(errorOf([&] { kiln::mean(x, {-3}); }),
            "mean: dim -3 of dims [-3] is out of range for f32[2,3]@cpu (expected dims in [-2, 1])");
  EXPECT_EQ(errorOf([&] { amax(x, {1, -1}); }), "amax: dim 1 is repeated in dims [1, -1] for f32[2,3]@cpu");
  EXPECT_EQ(errorOf([&] { argmax(x, 2); }),
            "argmax: dim 2 is out of range for f32[2,3]@cpu (expected a dim in [-2, 1])");
  EXPECT_EQ(errorOf([&] { kiln::max(x, -3); }),
            "max: dim -3 is out of range for f32[2,3]@cpu (expected a dim in [-2, 1])");
  EXPECT_EQ(errorOf([&] { softmax(x, 2); }),
            "softmax: dim 2 is out of range for f32[2,3]@cpu (expected a dim in [-2, 1])");
  EXPECT_EQ(errorOf([&] { kiln::mean(zeros({4}, DType::i32)); }),
            "mean: expected a floating-point dtype (f32, f64, f16, bf16), got i32[4]@cpu");
  EXPECT_EQ(errorOf([&] { kiln::var(zeros({4}, DType::boolean)); }),
            "var: expected a floating-point dtype (f32, f64, f16, bf16), got bool[4]@cpu");
  EXPECT_EQ(errorOf([&] { argmax(zeros({4}, DType::boolean), 0); }),
            "argmax: dtype bool is not supported, got bool[4]@cpu");
  EXPECT_EQ(errorOf([&] {
              amax(zeros({2, 0}), {1});
            }),
            "amax: cannot reduce dim 1 of f32[2,0]@cpu, which has size 0 (amax of no elements is undefined)");
  EXPECT_EQ(errorOf([&] {
              argmax(zeros({0, 2}), 0);
            }),
            "argmax: cannot reduce dim 0 of f32[0,2]@cpu, which has size 0 (argmax of no elements is undefined)");
  EXPECT_EQ(errorOf([&] { softmax(zeros({3}, DType::i64), 0); }),
            "softmax: expected a floating-point dtype (f32, f64, f16, bf16), got i64[3]@cpu");
  EXPECT_EQ(errorOf([&] { layerNorm(x, {2}); }),
            "layer_norm: normalized_shape [2] does not match the last dims of f32[2,3]@cpu");
  EXPECT_EQ(errorOf([&] { layerNorm(x, {}); }), "layer_norm: expected a non-empty normalized_shape, got []");
  EXPECT_EQ(errorOf([&] { layerNorm(x, {3}, zeros({4})); }),
            "layer_norm: expected weight of shape [3], got f32[4]@cpu");
  EXPECT_EQ(errorOf([&] {
              layerNorm(x, {3}, {}, zeros({2, 3}));
            }),
            "layer_norm: expected bias of shape [3], got f32[2,3]@cpu");
  EXPECT_EQ(errorOf([&] { kiln::sum(Tensor()); }), "sum: argument 0 is an undefined tensor");
}

}  // namespace
