// Fused attention (kiln::scaledDotProductAttention, the `attention` op,
// the fuse-attention pass; docs/ops.md "attention"):
// - eager, the fused op equals the unfused ops (matmul, softmax, dropout,
//   matmul) within the documented tolerance, forward and gradients, with
//   masks, the causal option and dropout, whose mask is the unfused graph's
//   for the same generator state;
// - compiled programs that call it equal eager ones bit for bit, training
//   included, and draw afresh at each call;
// - fuse-attention turns the unfused ops into one attention node in
//   compiled programs (the [heads, Lq, Lk] scores never allocated), and
//   leaves them where something else reads the weights;
// - bad input gets a kiln::Error naming shapes, dtypes and devices.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "tests/common/same_bits.h"

namespace {

using namespace kiln;

Tensor normal(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  return randn(shape, gen).to(dtype);
}


/// |a - b| <= tol · (1 + max |b|) elementwise, NaN where b is NaN.
::testing::AssertionResult near(const Tensor& a, const Tensor& b, double tol) {
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).toVector<double>(), y = b.to(DType::f64).toVector<double>();
  double largest = 0;
  for (double v : y)
    if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(y[i]) != std::isnan(x[i]) || (!std::isnan(y[i]) && !(std::abs(x[i] - y[i]) <= tol * (1 + largest))))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionSuccess();
}

/// The unfused ops, as a user writes them.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  const double inf = std::numeric_limits<double>::infinity();
  if (o.isCausal) {
    const int64_t lq = q.size(-2), lk = k.size(-2);
    std::vector<uint8_t> keep(static_cast<size_t>(lq * lk));
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t j = 0; j < lk; ++j) keep[static_cast<size_t>(i * lk + j)] = j <= i;
    s = where(fromVector(std::vector<bool>(keep.begin(), keep.end()), {lq, lk}), s, -inf);
  }
  if (o.attnMask.defined()) s = o.attnMask.dtype() == DType::boolean ? where(o.attnMask, s, -inf) : s + o.attnMask;
  Tensor w = softmax(s, -1);
  if (o.dropoutP > 0) w = dropout(w, o.dropoutP, true, *o.generator);
  return matmul(w, v);
}

struct Config {
  std::string name;
  Shape q, k, v;
  bool causal = false;
  int mask = 0;  // 0 none, 1 additive [Lq, Lk], 2 bool [1, Lq, Lk], 3 padding: bool [B, 1, 1, Lk]
  double p = 0;
};

std::vector<Config> configs() {
  return {{"plain", {2, 3, 70, 16}, {2, 3, 130, 16}, {2, 3, 130, 8}},
          {"causal", {3, 100, 32}, {3, 100, 32}, {3, 100, 32}, true},
          {"additive mask", {2, 65, 8}, {2, 40, 8}, {2, 40, 5}, false, 1},
          {"bool mask, causal", {2, 2, 33, 8}, {2, 2, 33, 8}, {2, 2, 33, 8}, true, 2},
          {"padding mask", {2, 3, 70, 16}, {2, 3, 90, 16}, {2, 3, 90, 8}, false, 3},
          {"dropout", {2, 2, 70, 16}, {2, 2, 70, 16}, {2, 2, 70, 16}, false, 0, 0.2},
          {"everything", {2, 3, 70, 12}, {2, 3, 70, 12}, {2, 3, 70, 12}, true, 1, 0.1}};
}

AttentionOptions optionsFor(const Config& c, Generator* gen, DType dtype) {
  AttentionOptions o;
  o.isCausal = c.causal, o.dropoutP = c.p, o.generator = gen;
  const int64_t lq = c.q[c.q.size() - 2], lk = c.k[c.k.size() - 2];
  if (c.mask == 1) o.attnMask = normal({lq, lk}, 9, dtype);
  if (c.mask == 2) o.attnMask = gt(normal({1, lq, lk}, 10), -1.0);
  if (c.mask == 3) {  // batch b sees its first lk - 7·(b + 1) keys: padding at the end
    const int64_t batch = c.q[0];
    std::vector<bool> keep(static_cast<size_t>(batch * lk));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < lk; ++j) keep[static_cast<size_t>(b * lk + j)] = j < lk - 7 * (b + 1);
    o.attnMask = fromVector(keep, {batch, 1, 1, lk});
  }
  return o;
}

TEST(Attention, FusedEqualsTheUnfusedOpsWithinTheTolerance) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Config& c : configs()) {
      SCOPED_TRACE(c.name + " " + std::string(dtypeName(dtype)));
      const double tol = dtype == DType::f32 ? 2e-5 : 1e-12;
      Generator gen(5);
      const AttentionOptions o = optionsFor(c, &gen, dtype);
      // Two sets of leaves: the fused op's and the unfused ops'.
      Tensor q = normal(c.q, 1, dtype).setRequiresGrad(), k = normal(c.k, 2, dtype).setRequiresGrad();
      Tensor v = normal(c.v, 3, dtype).setRequiresGrad();
      Tensor q2 = q.detach().clone().setRequiresGrad(), k2 = k.detach().clone().setRequiresGrad();
      Tensor v2 = v.detach().clone().setRequiresGrad();
      gen.setOffset(0);
      const Tensor fused = scaledDotProductAttention(q, k, v, o);
      const Tensor weights = normal(fused.shape(), 11, dtype);  // of the loss
      sum(fused * weights).backward();
      gen.setOffset(0);
      const Tensor want = unfused(q2, k2, v2, o);
      sum(want * weights).backward();
      EXPECT_TRUE(near(fused, want, tol));
      EXPECT_TRUE(near(q.grad(), q2.grad(), tol));
      EXPECT_TRUE(near(k.grad(), k2.grad(), tol));
      EXPECT_TRUE(near(v.grad(), v2.grad(), tol));
    }
  }
}

TEST(Attention, ARowWithEveryKeyMaskedIsNaNAsTheUnfusedSoftmax) {
  std::vector<bool> keep(4 * 6, true);
  for (int j = 0; j < 6; ++j) keep[static_cast<size_t>(2 * 6 + j)] = false;  // query 2 sees nothing
  AttentionOptions o;
  o.attnMask = fromVector(keep, {4, 6});
  const Tensor out = scaledDotProductAttention(normal({4, 8}, 1), normal({6, 8}, 2), normal({6, 3}, 3), o);
  const std::vector<float> values = out.toVector<float>();
  for (int i = 0; i < 4; ++i)
    for (int e = 0; e < 3; ++e) EXPECT_EQ(std::isnan(values[static_cast<size_t>(i * 3 + e)]), i == 2) << i << "," << e;
}

TEST(Attention, CompiledCallsEqualEagerBitForBitAndDrawAfreshEachCall) {
  const Tensor q = normal({2, 70, 16}, 1), k = normal({2, 90, 16}, 2), v = normal({2, 90, 8}, 3);
  const Tensor mask = normal({70, 90}, 4);
  Generator gen(7);
  auto fn = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    AttentionOptions o;
    o.attnMask = mask, o.isCausal = true, o.dropoutP = 0.25, o.generator = &gen;
    return scaledDotProductAttention(a, b, c, o);
  };
  auto compiled = compile(fn);
  std::vector<Tensor> eager, traced;
  gen.setOffset(0);
  for (int call = 0; call < 3; ++call) eager.push_back(fn(q, k, v));
  gen.setOffset(0);
  for (int call = 0; call < 3; ++call) traced.push_back(compiled(q, k, v));
  for (int call = 0; call < 3; ++call) EXPECT_TRUE(sameBits(traced[call], eager[call])) << "call " << call;
  EXPECT_FALSE(sameBits(eager[0], eager[1]));  // a new mask each call
  EXPECT_NE(compiled.lastGraph().find("attention("), std::string::npos) << compiled.lastGraph();
}

TEST(Attention, CompiledTrainingStepsEqualEagerOnesBitForBit) {
  // A step's loss and every gradient, eagerly and compiled (forward and
  // backward traced, attention_backward in the program).
  auto step = [](const Tensor& x, const Tensor& w) {
    const Tensor h = matmul(x, w);  // [2, 70, 3·16]
    const Tensor q = h.narrow(-1, 0, 16), k = h.narrow(-1, 16, 16), v = h.narrow(-1, 32, 16);
    AttentionOptions o;
    o.isCausal = true;
    const Tensor loss = mean(pow(scaledDotProductAttention(q, k, v, o), 2.0));
    return loss;
  };
  const Tensor x = normal({2, 70, 24}, 1);
  Tensor w1 = normal({24, 48}, 2).setRequiresGrad(), w2 = w1.detach().clone().setRequiresGrad();
  step(x, w1).backward();
  auto compiled = compile([&](const Tensor& xx) {
    const Tensor loss = step(xx, w2);
    loss.backward();
    return loss;
  });
  compiled(x);
  EXPECT_TRUE(sameBits(w2.grad(), w1.grad()));
  EXPECT_NE(compiled.lastGraph().find("attention_backward("), std::string::npos) << compiled.lastGraph();
}

TEST(Attention, FuseAttentionReplacesTheUnfusedOpsInCompiledPrograms) {
  const Tensor q = normal({4, 130, 16}, 1), k = normal({4, 130, 16}, 2), v = normal({4, 130, 16}, 3);
  const Tensor mask = normal({130, 130}, 4);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Generator gen(3);
    auto fn = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
      AttentionOptions o;
      if (variant >= 1) o.attnMask = mask;
      if (variant == 2) o.dropoutP = 0.3, o.generator = &gen;
      return unfused(a, b, c, o);
    };
    gen.setOffset(0);
    const Tensor eager = fn(q, k, v);
    auto compiled = compile(fn);
    gen.setOffset(0);
    const Tensor out = compiled(q, k, v);
    EXPECT_TRUE(near(out, eager, 2e-5));
    const std::string graph = compiled.lastGraph();
    EXPECT_NE(graph.find("attention("), std::string::npos) << graph;
    EXPECT_EQ(graph.find("softmax"), std::string::npos);
    EXPECT_EQ(graph.find("amax("), std::string::npos) << graph;
    EXPECT_EQ(graph.find("f32[4,130,130]"), std::string::npos) << "the scores still exist:\n" << graph;
    EXPECT_EQ(compiled.lastNumKernels(), 1) << graph;  // one library call
  }
}

TEST(Attention, FuseAttentionLeavesWeightsThatSomethingElseReads) {
  const Tensor q = normal({2, 20, 8}, 1), k = normal({2, 20, 8}, 2), v = normal({2, 20, 8}, 3);
  auto compiled = compile([](const Tensor& a, const Tensor& b, const Tensor& c) {
    const Tensor w = softmax(matmul(a, b.transpose(-2, -1)) * 0.5, -1);
    return std::vector<Tensor>{matmul(w, c), w};  // the weights are returned too
  });
  const std::vector<Tensor> out = compiled(q, k, v);
  EXPECT_EQ(compiled.lastGraph().find("attention("), std::string::npos) << compiled.lastGraph();
  const Tensor w = softmax(matmul(q, k.transpose(-2, -1)) * 0.5, -1);
  EXPECT_TRUE(sameBits(out[0], matmul(w, v)));
}

TEST(Attention, BadInputNamesShapesDTypesAndDevices) {
  const Tensor q = normal({2, 5, 8}, 1), k = normal({2, 6, 8}, 2), v = normal({2, 6, 4}, 3);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message([&] { scaledDotProductAttention(q, normal({2, 6, 7}, 4), v); });
  EXPECT_NE(m.find("same last dim"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[2,6,7]"), std::string::npos) << m;
  m = message([&] { scaledDotProductAttention(q, k, normal({2, 5, 4}, 4)); });
  EXPECT_NE(m.find("number of keys"), std::string::npos) << m;
  m = message([&] { scaledDotProductAttention(q, k, v.to(DType::f64)); });
  EXPECT_NE(m.find("one floating-point dtype"), std::string::npos) << m;
  EXPECT_NE(m.find("f64[2,6,4]"), std::string::npos) << m;
  m = message([&] { scaledDotProductAttention(q, normal({3, 6, 8}, 4), normal({3, 6, 4}, 5)); });
  EXPECT_NE(m.find("do not broadcast"), std::string::npos) << m;
  AttentionOptions o;
  o.attnMask = normal({5, 7}, 6);
  m = message([&] { scaledDotProductAttention(q, k, v, o); });
  EXPECT_NE(m.find("does not broadcast to the weights' shape [2,5,6]"), std::string::npos) << m;
  o.attnMask = normal({5, 6}, 6).setRequiresGrad();
  m = message([&] { scaledDotProductAttention(q, k, v, o); });
  EXPECT_NE(m.find("requires grad"), std::string::npos) << m;
  o = {};
  o.dropoutP = 1.0;
  m = message([&] { scaledDotProductAttention(q, k, v, o); });
  EXPECT_NE(m.find("dropoutP must be in [0, 1)"), std::string::npos) << m;
  m = message([&] { scaledDotProductAttention(q, k, fromVector(std::vector<int64_t>(48, 1), {2, 6, 4})); });
  EXPECT_NE(m.find("i64[2,6,4]"), std::string::npos) << m;
}

TEST(Attention, F16AndBF16RunTheUnfusedOps) {
  // No fused kernel takes them (ir::fusedAttentionOn): the same values as
  // the unfused ops written out, bit for bit.
  for (DType dtype : {DType::f16, DType::bf16}) {
    const Tensor q = normal({2, 9, 8}, 1, dtype), k = normal({2, 9, 8}, 2, dtype), v = normal({2, 9, 8}, 3, dtype);
    AttentionOptions o;
    o.isCausal = true;
    EXPECT_TRUE(sameBits(scaledDotProductAttention(q, k, v, o), unfused(q, k, v, o))) << dtypeName(dtype);
  }
}

}  // namespace
