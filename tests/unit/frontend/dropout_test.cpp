// kiln::dropout eager and compiled: every element against a reference written
// with runtime::philox4x32_10 directly (views, broadcasting, high words of
// seed and offset, f16/bf16/f64), the fraction kept, the generator's
// advance (same state: same mask; next call: another), compiled == eager bit
// for bit over several calls with the generator advancing as eager does, the
// fused relu -> dropout -> mul as one kernel, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"
#include "runtime/numeric.h"
#include "runtime/philox.h"

namespace {

using namespace kiln;

uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

/// Whether element i of the draw (seed, offset) is kept: the definition of
/// docs/ops.md, "Dropout", with runtime::philox4x32_10.
bool keeps(uint64_t seed, uint64_t offset, uint64_t i, double p) {
  // Element i takes word i % 4 of the block of counter {i / 4, offset}.
  const auto r = runtime::philox4x32_10({lo(i / 4), hi(i / 4), lo(offset), hi(offset)}, {lo(seed), hi(seed)});
  return static_cast<double>(runtime::uniformFromBits(r[i % 4])) > p;
}

/// The f32 dropout of `x` (its elements in row-major order) by the reference.
std::vector<float> reference(const std::vector<float>& x, uint64_t seed, uint64_t offset, double p) {
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = keeps(seed, offset, i, p) ? x[i] * scale : 0.0f;
  return out;
}

/// Element-by-element equality of the bits, with the first difference.
::testing::AssertionResult sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " elements";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

TEST(Dropout, EagerMatchesThePhiloxReference) {
  Generator gen(0xdeadbeef12345678ull);
  gen.setOffset(0x100000002ull);  // high words of the key and the counter in use
  Tensor x = randn({301, 67}, gen);
  const uint64_t offset = gen.offset();
  Tensor y = dropout(x, 0.3, true, gen);
  EXPECT_EQ(gen.offset(), offset + 1) << "one call, one draw";
  EXPECT_TRUE(sameBits(y.toVector(), reference(x.toVector(), gen.seed(), offset, 0.3)));
}

TEST(Dropout, TheIndexIsTheElementsPlaceInTheResultForViewsAndBroadcasts) {
  Generator gen(5);
  Tensor x = randn({40, 70}, gen);
  for (const Tensor& v : {x.t(), x.slice(1, 3, 60, 2), x.slice(0, 1, 2).expand({9, 70}), x.select(1, 4)}) {
    const uint64_t offset = gen.offset();
    Tensor y = dropout(v, 0.5, true, gen);
    EXPECT_EQ(y.shape(), v.shape());
    EXPECT_TRUE(sameBits(y.toVector(), reference(v.toVector(), gen.seed(), offset, 0.5))) << v.str();
  }
}

TEST(Dropout, FourConsecutiveElementsShareOnePhiloxBlock) {
  // Elements 4k .. 4k+3 take words 0 .. 3 of the block of counter {k,
  // offset} (Note [Dropout draws]): with p = 1 - 2^-8 an element is kept
  // exactly where the top 8 bits of its word are all ones, so which of
  // 2^20 elements are kept names the words of the blocks, checked here
  // against runtime::philox4x32_10 directly, word by word.
  const int64_t n = int64_t{1} << 20;
  const double p = 1.0 - 1.0 / 256;
  Generator gen(2024);
  const uint64_t offset = gen.offset();
  const std::vector<float> y = dropout(ones({n}), p, true, gen).toVector();
  int64_t kept = 0;
  for (int64_t k = 0; k < n / 4; ++k) {
    const auto r = runtime::philox4x32_10({lo(k), hi(k), lo(offset), hi(offset)}, {lo(gen.seed()), hi(gen.seed())});
    for (int w = 0; w < 4; ++w) {
      ASSERT_EQ(y[static_cast<size_t>(4 * k + w)] != 0.0f, (r[w] >> 24) == 0xffu) << "block " << k << " word " << w;
      kept += y[static_cast<size_t>(4 * k + w)] != 0.0f;
    }
  }
  EXPECT_NEAR(static_cast<double>(kept), n / 256.0, 5 * std::sqrt(n / 256.0)) << "about 4096 kept";
}

TEST(Dropout, EachWordOfABlockKeepsOneMinusPAndNeighboursAreIndependent) {
  // The four words of a block are used by neighbouring elements: each lane
  // (i % 4) alone keeps a fraction 1 - p, and two neighbours in one block
  // are both kept with probability (1 - p)^2, within five sigma.
  const int64_t n = int64_t{1} << 22;
  Generator gen(99);
  const double p = 0.5;
  const std::vector<float> y = dropout(ones({n}), p, true, gen).toVector();
  int64_t lane[4] = {0, 0, 0, 0}, pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    lane[i % 4] += y[static_cast<size_t>(i)] != 0.0f;
    if (i % 2 == 0) pairs += y[static_cast<size_t>(i)] != 0.0f && y[static_cast<size_t>(i + 1)] != 0.0f;
  }
  const double m = static_cast<double>(n / 4);
  for (int w = 0; w < 4; ++w)
    EXPECT_NEAR(static_cast<double>(lane[w]) / m, 1 - p, 5 * std::sqrt(p * (1 - p) / m)) << "lane " << w;
  const double q = (1 - p) * (1 - p), np = static_cast<double>(n / 2);
  EXPECT_NEAR(static_cast<double>(pairs) / np, q, 5 * std::sqrt(q * (1 - q) / np));
}

TEST(Dropout, KeepsAFractionOneMinusPWithinFiveSigma) {
  const int64_t n = 1 << 20;
  Tensor x = ones({n});
  Generator gen(77);
  for (double p : {0.1, 0.25, 0.5, 0.9}) {
    const std::vector<float> y = dropout(x, p, true, gen).toVector();
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int64_t kept = 0;
    for (float v : y) {
      ASSERT_TRUE(v == 0.0f || v == scale) << v;
      kept += v != 0.0f;
    }
    const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
    EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), 1 - p, 5 * sigma) << "p = " << p;
  }
}

TEST(Dropout, SameStateSameMaskNextDrawAnotherMask) {
  Tensor x = ones({4096});
  Generator a(123), b(123);
  const std::vector<float> first = dropout(x, 0.5, true, a).toVector();
  EXPECT_TRUE(sameBits(first, dropout(x, 0.5, true, b).toVector())) << "same seed and offset";
  const std::vector<float> second = dropout(x, 0.5, true, a).toVector();
  int differ = 0;
  for (size_t i = 0; i < first.size(); ++i) differ += first[i] != second[i];
  EXPECT_GT(differ, 1000) << "the next offset draws another mask (about half the elements differ)";
  a.setOffset(0);
  EXPECT_TRUE(sameBits(first, dropout(x, 0.5, true, a).toVector())) << "setOffset replays a draw";
  Generator c(124);
  EXPECT_FALSE(sameBits(first, dropout(x, 0.5, true, c).toVector())) << "another seed";
  // A Generator is a handle: a copy draws from the same state.
  Generator alias = a;
  dropout(x, 0.5, true, alias);
  EXPECT_EQ(a.offset(), 2u);
}

TEST(Dropout, ZeroOrEvalIsTheInputOneIsZeros) {
  Generator gen(1);
  Tensor x = randn({3, 5}, gen);
  const uint64_t offset = gen.offset();
  EXPECT_EQ(dropout(x, 0.0, true, gen).impl(), x.impl());
  EXPECT_EQ(dropout(x, 0.7, false, gen).impl(), x.impl());
  EXPECT_EQ(gen.offset(), offset) << "nothing drawn";
  Tensor nans = full({64}, NAN);
  EXPECT_EQ(dropout(nans, 1.0, true, gen).toVector(), std::vector<float>(64, 0.0f));
  EXPECT_EQ(gen.offset(), offset + 1);
}

TEST(Dropout, HalfBFloat16AndDouble) {
  Generator gen(9);
  Tensor base = randn({33, 65}, gen);
  const double p = 0.2;
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  for (DType d : {DType::f16, DType::bf16}) {
    Tensor x = base.to(d);
    const uint64_t offset = gen.offset();
    const std::vector<float> got = dropout(x, p, true, gen).to(DType::f32).toVector();
    const std::vector<float> xs = x.to(DType::f32).toVector();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = keeps(gen.seed(), offset, i, p) ? roundToDType(xs[i] * scale, d) : 0.0;
      ASSERT_EQ(got[i], want) << dtypeName(d) << " element " << i;
    }
  }
  Tensor x = base.to(DType::f64);
  const uint64_t offset = gen.offset();
  Tensor y = dropout(x, p, true, gen);
  EXPECT_EQ(y.dtype(), DType::f64);
  const std::vector<double> got = y.toVector<double>(), xs = x.toVector<double>();
  for (size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(got[i], keeps(gen.seed(), offset, i, p) ? xs[i] * (1.0 / (1.0 - p)) : 0.0) << i;
}

Tensor reluDropoutMul(const Tensor& x, Generator& gen) { return dropout(relu(x), 0.25, true, gen) * x; }

TEST(Dropout, CompiledEqualsEagerOnEveryCallAndAdvancesTheGeneratorAlike) {
  Generator seedGen(3);
  Tensor x = randn({257, 129}, seedGen);
  Generator eagerGen(2024), compiledGen(2024);
  auto f = compile([&](const Tensor& t) { return reluDropoutMul(t, compiledGen); });
  std::vector<float> previous;
  for (int call = 0; call < 3; ++call) {
    const uint64_t offset = eagerGen.offset();
    const std::vector<float> eager = reluDropoutMul(x, eagerGen).toVector();
    const std::vector<float> compiled = f(x).toVector();
    EXPECT_TRUE(sameBits(eager, compiled)) << "call " << call;
    EXPECT_EQ(compiledGen.offset(), eagerGen.offset()) << "call " << call;
    // The one-op eager dropout and the C++ reference give the same mask.
    std::vector<float> r = x.toVector();
    for (float& v : r) v = v < 0 ? 0.0f : v;
    r = reference(r, 2024, offset, 0.25);
    const std::vector<float> xs = x.toVector();
    for (size_t i = 0; i < r.size(); ++i) r[i] *= xs[i];
    EXPECT_TRUE(sameBits(eager, r)) << "call " << call;
    EXPECT_FALSE(sameBits(compiled, previous)) << "call " << call << " replayed the previous mask";
    previous = compiled;
  }
  EXPECT_EQ(f.numCompiles(), 1);
  EXPECT_EQ(f.lastNumKernels(), 1) << "relu -> dropout -> mul is one kernel:\n" << f.lastGraph();
  // seed and offset are inputs of the program, not constants.
  EXPECT_NE(f.lastGraph().find("dropout("), std::string::npos);
  EXPECT_NE(f.lastGraph().find("%seed0: i64[]@cpu"), std::string::npos) << f.lastGraph();
  EXPECT_NE(f.lastGraph().find("%offset0: i64[]@cpu"), std::string::npos) << f.lastGraph();
}

TEST(Dropout, CompiledSeesManualSeedAndDrawsEachDropoutInOrder) {
  Generator gen(10);
  Tensor x = ones({1000});
  auto f = compile([&](const Tensor& t) {
    Tensor a = dropout(t, 0.5, true, gen);
    Tensor w = full({1000}, 2.0);  // a capture between the two draws' inputs
    return std::vector<Tensor>{a, dropout(a * w, 0.3, true, gen)};
  });
  auto eager = [&](const Tensor& t) {
    Tensor a = dropout(t, 0.5, true, gen);
    return std::vector<Tensor>{a, dropout(a * 2.0, 0.3, true, gen)};
  };
  for (uint64_t seed : {5u, 6u}) {
    gen.manualSeed(seed);
    const auto e = eager(x);
    gen.manualSeed(seed);
    const auto c = f(x);
    EXPECT_EQ(gen.offset(), 2u);
    EXPECT_TRUE(sameBits(e[0].toVector(), c[0].toVector())) << "seed " << seed;
    EXPECT_TRUE(sameBits(e[1].toVector(), c[1].toVector())) << "seed " << seed;
    EXPECT_TRUE(sameBits(e[0].toVector(), reference(x.toVector(), seed, 0, 0.5)));
  }
  EXPECT_EQ(f.numCompiles(), 1);
}

TEST(Dropout, TracingDrawsNothing) {
  Generator gen(4);
  Trace tr = trace([&](const Tensor& t) { return dropout(t, 0.5, true, gen); }, {{DType::f32, {8}, Device::cpu()}});
  EXPECT_EQ(gen.offset(), 0u);
  // One per-call binding, of inputs 1 and 2 (the seed and the offset), that
  // reads the generator's state when a call binds it, and advances it.
  ASSERT_EQ(tr.bindings.size(), 1u);
  EXPECT_EQ(tr.bindings[0].kind, InputBinding::Kind::perCall);
  EXPECT_EQ(tr.bindings[0].inputs, (std::vector<int>{1, 2}));
  gen.manualSeed(77);
  gen.setOffset(5);
  const std::vector<Tensor> bound = tr.bindings[0].bind({});
  EXPECT_EQ(bound.at(0).toVector<int64_t>(), (std::vector<int64_t>{77}));
  EXPECT_EQ(bound.at(1).toVector<int64_t>(), (std::vector<int64_t>{5}));
  EXPECT_EQ(gen.offset(), 6u);
}

TEST(Dropout, BackwardIsDropoutOfTheGradientWithTheSameMask) {
  Generator gen(31);
  gen.setOffset(6);
  Tensor x = randn({19, 23}, gen).setRequiresGrad();
  const uint64_t offset = gen.offset();
  Tensor y = dropout(x, 0.35, true, gen);
  EXPECT_EQ(y.gradFnName(), "DropoutBackward");
  Generator other(32);
  Tensor g = randn({19, 23}, other);
  y.backward(g);
  EXPECT_EQ(gen.offset(), offset + 1) << "backward draws nothing new";
  EXPECT_TRUE(sameBits(x.grad().toVector(), reference(g.toVector(), gen.seed(), offset, 0.35)));
  // Where x is not 0, the kept elements of y are the kept elements of the gradient.
  const std::vector<float> ys = y.toVector(), grad = x.grad().toVector();
  for (size_t i = 0; i < ys.size(); ++i) EXPECT_EQ(ys[i] != 0.0f, grad[i] != 0.0f) << i;
  // p = 0 and eval return x: the gradient passes through unchanged.
  Tensor z = x * 1.0;
  EXPECT_EQ(dropout(z, 0.0, true, gen).impl(), z.impl());
}

TEST(Dropout, Errors) {
  Tensor x = ones({4});
  EXPECT_EQ(errorOf([&] { dropout(x, 1.5); }), "dropout: p must be in [0, 1], got 1.5");
  EXPECT_EQ(errorOf([&] { dropout(x, -0.1, false); }), "dropout: p must be in [0, 1], got -0.1");
  EXPECT_EQ(errorOf([&] { dropout(x, NAN); }), "dropout: p must be in [0, 1], got nan");
  EXPECT_EQ(errorOf([&] { dropout(x.to(DType::i32), 0.5); }),
            "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got i32[4]@cpu");
  EXPECT_EQ(errorOf([&] { dropout(x.to(DType::boolean), 0.5, false); }),
            "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got bool[4]@cpu");
  EXPECT_EQ(errorOf([&] { dropout(Tensor(), 0.5); }), "dropout: argument 0 is an undefined tensor");
  Generator gen(1);
  EXPECT_EQ(errorOf([&] { dropout(x.to(DType::i64), 0.5, true, gen); }),
            "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got i64[4]@cpu");
  EXPECT_EQ(gen.offset(), 0u) << "a failed call draws nothing";
}

}  // namespace
