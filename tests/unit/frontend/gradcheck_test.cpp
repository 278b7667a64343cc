// Every differentiable op's gradient against finite differences in f64
// (DESIGN.md §11), with broadcasting and views; and a check that no op of
// Ops.def with a gradient is missing here.
#include <gtest/gtest.h>

#include <map>

#include "frontend/autograd/formulas.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// A leaf of f64 normal samples that requires grad.
Tensor leaf(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, g).to(DType::f64).setRequiresGrad();
}
/// A leaf of f64 values in [0.5, 2.5) (log, sqrt, div).
Tensor positiveLeaf(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  NoGradGuard noGrad;
  return (sigmoid(randn(shape, g).to(DType::f64)) * 2.0 + 0.5).setRequiresGrad();
}

struct Case {
  std::string name;
  Fn fn;
  std::vector<Tensor> inputs;
  GradcheckOptions options{};
};

/// The cases by the op whose formula they check (several per op).
std::multimap<ir::Op, Case> cases() {
  using ir::Op;
  std::multimap<Op, Case> c;
  auto add = [&](Op op, std::string name, Fn fn, std::vector<Tensor> in, GradcheckOptions o = {}) {
    c.emplace(op, Case{std::move(name), std::move(fn), std::move(in), o});
  };
  add(Op::add, "broadcast", [](auto& x) { return x[0] + x[1]; }, {leaf({2, 3}, 1), leaf({3}, 2)});
  add(Op::add, "scalar", [](auto& x) { return 1.5 + x[0]; }, {leaf({4}, 3)});
  add(Op::sub, "broadcast", [](auto& x) { return x[0] - x[1]; }, {leaf({2, 1, 3}, 4), leaf({4, 3}, 5)});
  add(Op::mul, "broadcast", [](auto& x) { return x[0] * x[1]; }, {leaf({2, 3}, 6), leaf({2, 1}, 7)});
  add(Op::mul, "same input", [](auto& x) { return x[0] * x[0]; }, {leaf({5}, 8)});
  add(Op::div, "broadcast", [](auto& x) { return x[0] / x[1]; }, {leaf({2, 3}, 9), positiveLeaf({3}, 10)});
  add(Op::div, "scalar numerator", [](auto& x) { return 2.0 / x[0]; }, {positiveLeaf({4}, 11)});
  add(Op::maximum, "broadcast", [](auto& x) { return maximum(x[0], x[1]); }, {leaf({2, 3}, 12), leaf({3}, 13)});
  add(Op::minimum, "broadcast", [](auto& x) { return minimum(x[0], x[1]); }, {leaf({2, 3}, 14), leaf({3}, 15)});
  add(Op::neg, "neg", [](auto& x) { return -x[0]; }, {leaf({3}, 16)});
  add(Op::relu, "relu", [](auto& x) { return relu(x[0]); }, {leaf({2, 4}, 17)});
  add(Op::exp, "exp", [](auto& x) { return exp(x[0]); }, {leaf({2, 3}, 18)});
  add(Op::log, "log", [](auto& x) { return log(x[0]); }, {positiveLeaf({2, 3}, 19)});
  add(Op::sqrt, "sqrt", [](auto& x) { return sqrt(x[0]); }, {positiveLeaf({2, 3}, 20)});
  add(Op::tanh, "tanh", [](auto& x) { return tanh(x[0]); }, {leaf({2, 3}, 21)});
  add(Op::sigmoid, "sigmoid", [](auto& x) { return sigmoid(x[0]); }, {leaf({2, 3}, 22)});
  add(Op::pow, "broadcast", [](auto& x) { return pow(x[0], x[1]); }, {positiveLeaf({2, 3}, 62), leaf({3}, 63)});
  add(Op::pow, "scalar exponent", [](auto& x) { return pow(x[0], 2.5); }, {positiveLeaf({4}, 64)});
  add(Op::pow, "integer exponent, negative base", [](auto& x) { return pow(x[0], 3); }, {leaf({4}, 65)});
  add(Op::pow, "scalar base", [](auto& x) { return pow(1.7, x[0]); }, {leaf({2, 2}, 66)});
  add(Op::abs, "abs", [](auto& x) { return abs(x[0]); }, {leaf({2, 3}, 67)});
  add(Op::rsqrt, "rsqrt", [](auto& x) { return rsqrt(x[0]); }, {positiveLeaf({2, 3}, 68)});
  add(Op::sin, "sin", [](auto& x) { return sin(x[0] * 3.0); }, {leaf({2, 3}, 69)});
  add(Op::cos, "cos", [](auto& x) { return cos(x[0] * 3.0); }, {leaf({2, 3}, 70)});
  add(Op::erf, "erf", [](auto& x) { return erf(x[0]); }, {leaf({2, 3}, 71)});
  add(Op::silu, "silu", [](auto& x) { return silu(x[0] * 2.0); }, {leaf({2, 3}, 72)});
  add(Op::gelu, "exact", [](auto& x) { return gelu(x[0] * 2.0); }, {leaf({2, 3}, 73)});
  add(Op::gelu, "tanh", [](auto& x) { return gelu(x[0] * 2.0, "tanh"); }, {leaf({2, 3}, 74)});
  add(Op::softplus, "softplus", [](auto& x) { return softplus(x[0] * 3.0); }, {leaf({2, 3}, 75)});
  // Both sides of a low threshold (2x > 1: the identity, whose gradient is g).
  add(Op::softplus, "beta 2, threshold 1", [](auto& x) { return softplus(x[0], 2.0, 1.0); }, {leaf({3, 4}, 76)});
  add(Op::opt_barrier, "identity", [](auto& x) { return optimizationBarrier(x[0], ones({1}, DType::f64)) * x[0]; }, {leaf({2, 3}, 77)});
  // Through f32 and back: the step must be large enough for f32's rounding.
  add(Op::cast, "f64 to f32 and back", [](auto& x) { return (x[0].to(DType::f32) * 3.0f).to(DType::f64); },
      {leaf({3}, 23)}, {1e-2, 1e-3, 1e-3});
  add(Op::cast, "mixed dtypes promote", [](auto& x) { return x[0] * x[1].to(DType::f32); },
      {leaf({3}, 24), leaf({3}, 25)}, {1e-2, 1e-3, 1e-3});
  add(Op::where, "where",
      [](auto& x) { return where(fromVector<bool>({true, false, true}, {3}), x[0], x[1]); },
      {leaf({2, 3}, 26), leaf({3}, 27)});
  add(Op::sum, "dims", [](auto& x) { return sum(x[0], {1}); }, {leaf({2, 3, 2}, 28)});
  add(Op::sum, "all, keepdim", [](auto& x) { return sum(x[0], {}, true) * x[0]; }, {leaf({2, 3}, 29)});
  add(Op::mean, "dims", [](auto& x) { return mean(x[0], {0, 2}); }, {leaf({2, 3, 2}, 30)});
  add(Op::amax, "dim", [](auto& x) { return amax(x[0], {1}); }, {leaf({3, 4}, 31)});
  add(Op::amin, "keepdim", [](auto& x) { return amin(x[0], {0}, true); }, {leaf({3, 4}, 32)});
  add(Op::var, "unbiased", [](auto& x) { return var(x[0], {1}); }, {leaf({2, 5}, 33)});
  add(Op::var, "biased, all", [](auto& x) { return var(x[0], {}, 0); }, {leaf({2, 3}, 34)});
  add(Op::reshape, "view", [](auto& x) { return x[0].view({3, 2}) * x[1]; }, {leaf({2, 3}, 35), leaf({2}, 36)});
  add(Op::reshape, "flatten, unsqueeze, squeeze",
      [](auto& x) { return x[0].flatten().unsqueeze(0).squeeze() * 2.0; }, {leaf({2, 3}, 37)});
  add(Op::transpose, "t", [](auto& x) { return x[0].t() * x[1]; }, {leaf({2, 3}, 38), leaf({2}, 39)});
  add(Op::transpose, "permute", [](auto& x) { return x[0].permute({2, 0, 1}) * 1.0; }, {leaf({2, 3, 4}, 40)});
  add(Op::slice, "step 2", [](auto& x) { return x[0].slice(1, 1, 6, 2) * 3.0; }, {leaf({2, 7}, 41)});
  add(Op::slice, "select", [](auto& x) { return x[0].select(0, 1) * x[0].select(0, 2); }, {leaf({3, 4}, 42)});
  add(Op::slice, "narrow", [](auto& x) { return exp(x[0].narrow(0, 1, 2)); }, {leaf({4, 2}, 43)});
  add(Op::expand, "expand", [](auto& x) { return x[0].expand({3, 2, 4}) * x[1]; },
      {leaf({2, 1}, 44), leaf({3, 2, 4}, 45)});
  // Every evaluation must draw the same mask: the generator is put back first.
  Generator dropoutGen(61);
  add(Op::dropout, "same mask, broadcast",
      [dropoutGen](auto& x) mutable {
        dropoutGen.setOffset(0);
        return dropout(x[0], 0.4, true, dropoutGen) * x[1];
      },
      {leaf({3, 5}, 62), leaf({5}, 63)});
  add(Op::cat, "cat", [](auto& x) { return cat({x[0], x[1] * 2.0}, 1); }, {leaf({2, 3}, 46), leaf({2, 2}, 47)});
  add(Op::cat, "stack", [](auto& x) { return stack({x[0], x[1]}, 1); }, {leaf({2, 3}, 48), leaf({2, 3}, 49)});
  add(Op::matmul, "2-d", [](auto& x) { return matmul(x[0], x[1]); }, {leaf({3, 4}, 62), leaf({4, 2}, 63)});
  add(Op::matmul, "broadcast batch, transposed view",
      [](auto& x) { return matmul(x[0], x[1].transpose(1, 2)); }, {leaf({2, 1, 3, 4}, 64), leaf({3, 2, 4}, 65)});
  add(Op::matmul, "1-d cases", [](auto& x) { return matmul(matmul(x[0], x[1]), x[2]) * matmul(x[1], x[2]); },
      {leaf({4}, 66), leaf({4, 3}, 67), leaf({3}, 68)});
  add(Op::matmul, "linear with bias", [](auto& x) { return linear(x[0], x[1], x[2]); },
      {leaf({2, 5, 4}, 69), leaf({3, 4}, 70), leaf({3}, 71)});
  const Tensor index = fromVector(std::vector<int64_t>{2, 0, 2, 3});
  add(Op::index_select, "repeated indices", [index](auto& x) { return indexSelect(x[0], 1, index) * 1.5; },
      {leaf({3, 4}, 72)});
  add(Op::index_select, "embedding", [index](auto& x) { return embedding(x[0], index.view({2, 2})); },
      {leaf({5, 3}, 73)});
  add(Op::index_add, "repeated indices",
      [index](auto& x) { return indexAdd(x[0], 0, index, x[1]) * x[0]; }, {leaf({4, 3}, 74), leaf({4, 3}, 75)});
  // attention: the fused op's own backward (runtime/attention.h) through
  // blocks of 64 keys and queries (70 of each), heads as strided views, a
  // broadcast additive mask, the causal option and dropout (the generator
  // put back before each evaluation, as for dropout).
  add(Op::attention, "strided heads, additive mask",
      [](auto& x) {
        AttentionOptions o;
        o.attnMask = x[3];
        return scaledDotProductAttention(x[0].transpose(0, 1), x[1].transpose(0, 1), x[2].transpose(0, 1), o);
      },
      {leaf({70, 2, 5}, 76), leaf({70, 2, 5}, 77), leaf({70, 2, 3}, 78), leaf({70, 70}, 79).detach()});
  Generator attentionGen(80);
  add(Op::attention, "causal, dropout, more keys than queries",
      [attentionGen](auto& x) mutable {
        attentionGen.setOffset(0);
        AttentionOptions o;
        o.isCausal = true, o.dropoutP = 0.3, o.generator = &attentionGen;
        return scaledDotProductAttention(x[0], x[1], x[2], o);
      },
      {leaf({2, 3, 4}, 81), leaf({2, 66, 4}, 82), leaf({2, 66, 2}, 83)});
  // Convolutions (f64: kiln's direct loops, conv_transpose2d and
  // conv2d_backward_weight as the gradients): stride with a floor that
  // drops a row (output_padding), asymmetric "same" padding, dilation,
  // groups, and an unbatched input.
  add(Op::conv2d, "stride 2, padding 1, floor drops a row",
      [](auto& x) {
        Conv2dOptions o;
        o.stride = {2, 2}, o.padding = std::array<int64_t, 2>{1, 1};
        return conv2d(x[0], x[1], x[2], o);
      },
      {leaf({2, 3, 6, 5}, 84), leaf({4, 3, 3, 2}, 85), leaf({4}, 86)});
  add(Op::conv2d, "same padding, dilation 2, groups 2",
      [](auto& x) {
        Conv2dOptions o;
        o.padding = std::string("same"), o.dilation = {2, 1}, o.groups = 2;
        return conv2d(x[0], x[1], Tensor(), o);
      },
      {leaf({1, 4, 5, 6}, 87), leaf({6, 2, 2, 3}, 88)});
  add(Op::conv2d, "unbatched, strided view input",
      [](auto& x) { return conv2d(x[0].transpose(1, 2), x[1]); }, {leaf({2, 4, 5}, 89), leaf({3, 2, 2, 2}, 90)});
  add(Op::conv_transpose2d, "stride 2, output padding 1, groups 2",
      [](auto& x) {
        ConvTranspose2dOptions o;
        o.stride = {2, 3}, o.padding = {1, 0}, o.outputPadding = {1, 2}, o.groups = 2;
        return convTranspose2d(x[0], x[1], x[2], o);
      },
      {leaf({2, 4, 3, 3}, 91), leaf({4, 3, 3, 2}, 92), leaf({6}, 93)});
  add(Op::conv_transpose2d, "dilation",
      [](auto& x) {
        ConvTranspose2dOptions o;
        o.dilation = {2, 2};
        return convTranspose2d(x[0], x[1], Tensor(), o);
      },
      {leaf({1, 2, 3, 4}, 94), leaf({2, 3, 2, 2}, 95)});
  return c;
}

TEST(Gradcheck, EveryOpWithAGradient) {
  const auto all = cases();
  for (const auto& [op, kase] : all) {
    SCOPED_TRACE(std::string(ir::opName(op)) + ": " + kase.name);
    GradcheckResult r = gradcheck(kase.fn, kase.inputs, kase.options);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(Gradcheck, NoDifferentiableOpIsUntested) {
  const auto all = cases();
  for (const ir::OpInfo& info : ir::allOps()) {
    if (!ir::isDifferentiable(info.op) || info.kind == ir::OpKind::control) continue;
    EXPECT_TRUE(all.count(info.op)) << info.name << " has a gradient but no gradcheck case here";
  }
}

TEST(Gradcheck, Composites) {
  EXPECT_TRUE(gradcheck([](auto& x) { return softmax(x[0], 1); }, {leaf({3, 4}, 50)}).ok);
  EXPECT_TRUE(gradcheck([](auto& x) { return logSoftmax(x[0], 0); }, {leaf({3, 4}, 51)}).ok);
  auto ln = [](auto& x) { return layerNorm(x[0], {4}, x[1], x[2]); };
  GradcheckResult r = gradcheck(ln, {leaf({3, 4}, 52), leaf({4}, 53), leaf({4}, 54)});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck([](auto& x) { return layerNorm(x[0], {2, 3}); }, {leaf({2, 2, 3}, 55)});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck([](auto& x) { return clamp(x[0], -0.5, 0.5); }, {leaf({8}, 56)});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck([](auto& x) { return clamp(x[0], x[1], x[2]); }, {leaf({6}, 57), leaf({6}, 58) - 1.0, leaf({6}, 59) + 1.0});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck([](auto& x) { return x[0].t().contiguous() * x[0].t().clone(); }, {leaf({2, 3}, 60)});
  EXPECT_TRUE(r.ok) << r.message;
  // One bound, a number or a tensor (max(x, dim)'s values: random rows have no ties).
  r = gradcheck([](auto& x) { return clamp(x[0], std::nullopt, 0.25) + clamp(x[0], x[1], std::nullopt); },
                {leaf({6}, 61), leaf({6}, 62)});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck(
      [](auto& x) { return std::get<0>(kiln::max(x[0], 1)) + kiln::sum(std::get<0>(kiln::max(x[0], 0, true))); },
      {leaf({3, 4}, 63)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Gradcheck, FindsAWrongGradient) {
  // A function whose recorded gradient is wrong on purpose: the value of
  // 2x computed without gradient, then x added (gradient 1, not 3).
  auto wrong = [](const std::vector<Tensor>& x) {
    Tensor twice;
    {
      NoGradGuard noGrad;
      twice = x[0] * 2.0;
    }
    return twice + x[0];
  };
  GradcheckResult r = gradcheck(wrong, {leaf({3}, 61)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("analytical 1, numerical 3"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace kiln
