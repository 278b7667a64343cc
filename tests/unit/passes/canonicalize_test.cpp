// canonicalize: each rule's rewritten structure, the rewrites that must not
// happen (x + 0.0, a broadcasting x * 1, a same-type transpose that moves),
// the fixed point, statistics, and Note [Canonicalize is exact] checked on
// special values with the kernels' scalar formulas.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "common/graph_builders.h"
#include "ir/printer.h"
#include "ir/scalar_eval.h"
#include "passes/passes.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;

ir::Value* transpose(ir::Graph& g, ir::Value* x, std::vector<int64_t> perm) {
  return un(g, Op::transpose, x, {{"perm", std::move(perm)}});
}
ir::Value* reshape(ir::Graph& g, ir::Value* x, std::vector<int64_t> shape) {
  return un(g, Op::reshape, x, {{"shape", std::move(shape)}});
}

/// Runs canonicalize; returns its statistics.
std::map<std::string, int64_t> canonicalize(ir::Graph& g) {
  passes::PassManager pm("canonicalize");
  pm.run(g);
  return pm.statistics().at("canonicalize");
}

/// Builds `x op c` (or `c op x` when `constantFirst`) over x: f32[4] and
/// returns the graph's single output after canonicalize.
struct Built {
  ir::Graph g;
  ir::Value* x;
};
std::unique_ptr<Built> withConstant(Op op, double c, bool constantFirst) {
  auto b = std::make_unique<Built>();
  b->x = b->g.addInput(f32({4}), "x");
  ir::Value* k = constant(b->g, c);
  b->g.setOutputs({constantFirst ? bin(b->g, op, k, b->x) : bin(b->g, op, b->x, k)});
  canonicalize(b->g);
  return b;
}

/// Whether the graph is `return x`.
bool isJustX(const Built& b) { return b.g.numNodes() == 0 && b.g.outputs()[0] == b.x; }

/// Whether the graph is `return neg(x)`.
bool isNegX(const Built& b) {
  if (b.g.numNodes() != 1) return false;
  const ir::Node* n = b.g.outputs()[0]->node();
  return n && n->op() == Op::neg && n->input(0) == b.x;
}

TEST(Canonicalize, MulAndDivByOne) {
  EXPECT_TRUE(isJustX(*withConstant(Op::mul, 1.0, false))) << "x * 1";
  EXPECT_TRUE(isJustX(*withConstant(Op::mul, 1.0, true))) << "1 * x";
  EXPECT_TRUE(isJustX(*withConstant(Op::div, 1.0, false))) << "x / 1";
  EXPECT_FALSE(isJustX(*withConstant(Op::div, 1.0, true))) << "1 / x stays";
  EXPECT_FALSE(isJustX(*withConstant(Op::mul, 1.0000001, false))) << "x * 1.0000001 stays";
}

TEST(Canonicalize, MulAndDivByMinusOneIsNeg) {
  EXPECT_TRUE(isNegX(*withConstant(Op::mul, -1.0, false))) << "x * -1";
  EXPECT_TRUE(isNegX(*withConstant(Op::mul, -1.0, true))) << "-1 * x";
  EXPECT_TRUE(isNegX(*withConstant(Op::div, -1.0, false))) << "x / -1";
  EXPECT_EQ(withConstant(Op::div, -1.0, true)->g.numNodes(), 2) << "-1 / x stays";
}

TEST(Canonicalize, AddingZeroOnlyWhenTheZeroIsNegative) {
  EXPECT_TRUE(isJustX(*withConstant(Op::add, -0.0, false))) << "x + -0.0";
  EXPECT_TRUE(isJustX(*withConstant(Op::add, -0.0, true))) << "-0.0 + x";
  // x + 0.0 is +0.0 for x = -0.0: not x.
  auto plusZero = withConstant(Op::add, 0.0, false);
  ASSERT_EQ(plusZero->g.numNodes(), 2) << ir::printGraph(plusZero->g);
  EXPECT_EQ(plusZero->g.outputs()[0]->node()->op(), Op::add);
  EXPECT_EQ(withConstant(Op::add, 0.0, true)->g.numNodes(), 2) << "0.0 + x stays";
}

TEST(Canonicalize, SubtractingZeroOnlyWhenTheZeroIsPositive) {
  EXPECT_TRUE(isJustX(*withConstant(Op::sub, 0.0, false))) << "x - 0.0";
  EXPECT_EQ(withConstant(Op::sub, -0.0, false)->g.numNodes(), 2) << "x - (-0.0) is x + 0.0: stays";
  EXPECT_TRUE(isNegX(*withConstant(Op::sub, -0.0, true))) << "-0.0 - x";
  EXPECT_EQ(withConstant(Op::sub, 0.0, true)->g.numNodes(), 2) << "0.0 - x is +0.0 for x = 0.0: stays";
}

TEST(Canonicalize, BroadcastingIdentityIsNotApplied) {
  // x * 1 where the 1 is wider than x: the result is f32[4,8], x is f32[8].
  ir::Graph g;
  ir::Value* x = g.addInput(f32({8}), "x");
  ir::Value* s = g.addInput(f32({}), "s");
  g.setOutputs({bin(g, Op::mul, x, constant(g, 1.0, {4, 8})), bin(g, Op::add, constant(g, -0.0, {3}), s),
                bin(g, Op::maximum, s, s)});
  auto stats = canonicalize(g);
  ASSERT_EQ(g.numNodes(), 4) << ir::printGraph(g);
  EXPECT_EQ(g.outputs()[0]->type(), f32({4, 8}));
  EXPECT_EQ(g.outputs()[0]->node()->op(), Op::mul);
  EXPECT_EQ(g.outputs()[1]->node()->op(), Op::add);
  EXPECT_EQ(g.outputs()[2], s) << "maximum(s, s) has s's type";
  EXPECT_EQ(stats.at("rewrites"), 1);
}

TEST(Canonicalize, SameTypeBroadcastIsApplied) {
  // A constant 1 of x's own shape is still x * 1.
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4, 8}), "x");
  g.setOutputs({bin(g, Op::mul, x, constant(g, 1.0, {4, 8}))});
  canonicalize(g);
  EXPECT_EQ(g.numNodes(), 0);
  EXPECT_EQ(g.outputs()[0], x);
}

TEST(Canonicalize, NegationsFoldIntoAddAndSub) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  ir::Value* a = bin(g, Op::add, x, un(g, Op::neg, y));  // x - y
  ir::Value* b = bin(g, Op::add, un(g, Op::neg, x), y);  // y - x
  ir::Value* c = bin(g, Op::sub, x, un(g, Op::neg, y));  // x + y
  g.setOutputs({a, b, c});
  canonicalize(g);
  ASSERT_EQ(g.numNodes(), 3) << "every neg is gone: " << ir::printGraph(g);
  auto is = [](const ir::Value* v, Op op, const ir::Value* l, const ir::Value* r) {
    const ir::Node* n = v->node();
    return n && n->op() == op && n->input(0) == l && n->input(1) == r;
  };
  EXPECT_TRUE(is(g.outputs()[0], Op::sub, x, y)) << ir::printGraph(g);
  EXPECT_TRUE(is(g.outputs()[1], Op::sub, y, x)) << ir::printGraph(g);
  EXPECT_TRUE(is(g.outputs()[2], Op::add, x, y)) << ir::printGraph(g);
}

TEST(Canonicalize, ANegUsedElsewhereStays) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  ir::Value* n = un(g, Op::neg, y);
  g.setOutputs({bin(g, Op::add, x, n), n});
  canonicalize(g);
  ASSERT_EQ(g.numNodes(), 2) << ir::printGraph(g);
  EXPECT_EQ(g.outputs()[1], n);
  EXPECT_EQ(g.outputs()[0]->node()->op(), Op::sub);
}

TEST(Canonicalize, NegNegAndReluRelu) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* r1 = un(g, Op::relu, x);
  ir::Value* r3 = un(g, Op::relu, un(g, Op::relu, r1));
  ir::Value* n2 = un(g, Op::neg, un(g, Op::neg, x));
  ir::Value* n3 = un(g, Op::neg, un(g, Op::neg, un(g, Op::neg, x)));
  g.setOutputs({r3, n2, n3});
  auto stats = canonicalize(g);
  ASSERT_EQ(g.numNodes(), 2) << ir::printGraph(g);
  EXPECT_EQ(g.outputs()[0], r1);
  EXPECT_EQ(g.outputs()[1], x);
  const ir::Node* neg = g.outputs()[2]->node();
  ASSERT_TRUE(neg && neg->op() == Op::neg);
  EXPECT_EQ(neg->input(0), x);
  EXPECT_EQ(stats.at("relu-relu"), 2);
  EXPECT_EQ(stats.at("neg-neg"), 2);
  EXPECT_EQ(stats.at("rewrites"), 4);
}

TEST(Canonicalize, MaximumAndMinimumOfTheSameValue) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  ir::Value* other = bin(g, Op::maximum, x, y);
  g.setOutputs({bin(g, Op::maximum, x, x), bin(g, Op::minimum, y, y), other});
  canonicalize(g);
  EXPECT_EQ(g.outputs()[0], x);
  EXPECT_EQ(g.outputs()[1], y);
  EXPECT_EQ(g.outputs()[2], other) << "maximum(x, y) stays";
  EXPECT_EQ(g.numNodes(), 1);
}

TEST(Canonicalize, Transposes) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({2, 3, 4}), "x");
  ir::Value* sq = g.addInput(f32({4, 4}), "sq");
  ir::Value* identity = transpose(g, x, {0, 1, 2});
  ir::Value* roundTrip = transpose(g, transpose(g, x, {2, 0, 1}), {1, 2, 0});
  ir::Value* twice = transpose(g, transpose(g, x, {1, 0, 2}), {0, 2, 1});
  ir::Value* moves = transpose(g, sq, {1, 0});  // same type, not the identity
  g.setOutputs({identity, roundTrip, twice, moves});
  const ir::TensorType twiceType = twice->type();
  auto stats = canonicalize(g);
  EXPECT_EQ(g.outputs()[0], x);
  EXPECT_EQ(g.outputs()[1], x);
  const ir::Node* t = g.outputs()[2]->node();
  ASSERT_TRUE(t && t->op() == Op::transpose) << ir::printGraph(g);
  EXPECT_EQ(t->input(0), x);
  // Result dim i is x's dim p[q[i]]: p = [1,0,2], q = [0,2,1] -> [1,2,0].
  EXPECT_EQ(ir::intListAttr(t->attrs(), "perm", "transpose"), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(t->output()->type(), twiceType);
  EXPECT_EQ(g.outputs()[3], moves);
  EXPECT_EQ(g.numNodes(), 2) << ir::printGraph(g);
  EXPECT_EQ(stats.at("transpose-identity"), 1);
  EXPECT_EQ(stats.at("transpose-transpose"), 2);
}

TEST(Canonicalize, Reshapes) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({2, 3, 4}), "x");
  ir::Value* same = reshape(g, x, {2, 3, 4});
  ir::Value* twice = reshape(g, reshape(g, x, {6, 4}), {24});
  ir::Value* back = reshape(g, reshape(g, x, {6, 4}), {2, 3, 4});
  ir::Value* other = reshape(g, x, {4, 6});
  g.setOutputs({same, twice, back, other});
  canonicalize(g);
  EXPECT_EQ(g.outputs()[0], x);
  const ir::Node* r = g.outputs()[1]->node();
  ASSERT_TRUE(r && r->op() == Op::reshape) << ir::printGraph(g);
  EXPECT_EQ(r->input(0), x);
  EXPECT_EQ(r->output()->type(), f32({24}));
  EXPECT_EQ(g.outputs()[2], x);
  EXPECT_EQ(g.outputs()[3], other);
  EXPECT_EQ(g.numNodes(), 2) << ir::printGraph(g);
}

TEST(Canonicalize, MovedConstantIsAConstantOfTheNewType) {
  ir::Graph g;
  ir::Value* t = transpose(g, constant(g, 2.5, {2, 3}), {1, 0});
  ir::Value* r = reshape(g, constant(g, -0.0, {2, 3}), {6});
  g.setOutputs({t, r});
  canonicalize(g);
  ASSERT_EQ(g.numNodes(), 2) << ir::printGraph(g);
  const ir::Node* ct = g.outputs()[0]->node();
  const ir::Node* cr = g.outputs()[1]->node();
  ASSERT_EQ(ct->op(), Op::constant);
  ASSERT_EQ(cr->op(), Op::constant);
  EXPECT_EQ(ct->output()->type(), f32({3, 2}));
  EXPECT_EQ(cr->output()->type(), f32({6}));
  EXPECT_EQ(ir::floatAttr(ct->attrs(), "value", "constant"), 2.5);
  EXPECT_TRUE(std::signbit(ir::floatAttr(cr->attrs(), "value", "constant")));
}

TEST(Canonicalize, ReachesAFixedPoint) {
  // neg(neg(((x * 1) + -0.0) / 1)) * -1 -> neg(x)
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* v = bin(g, Op::mul, x, constant(g, 1.0));
  v = bin(g, Op::add, v, constant(g, -0.0));
  v = bin(g, Op::div, v, constant(g, 1.0));
  v = un(g, Op::neg, un(g, Op::neg, v));
  g.setOutputs({bin(g, Op::mul, v, constant(g, -1.0))});
  canonicalize(g);
  ASSERT_EQ(g.numNodes(), 1) << ir::printGraph(g);
  EXPECT_EQ(g.nodes()[0]->op(), Op::neg);
  EXPECT_EQ(g.nodes()[0]->input(0), x);
  passes::PassContext again("canonicalize");
  EXPECT_FALSE(passes::runCanonicalize(g, again)) << "nothing left to rewrite";
}

TEST(Canonicalize, RewritesAreRemarked) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  g.setOutputs({un(g, Op::relu, un(g, Op::relu, x))});
  passes::PassManager pm("canonicalize");
  pm.run(g);
  ASSERT_EQ(pm.remarks().size(), 1u);
  EXPECT_EQ(pm.remarks()[0].message, "relu(relu(x)) -> relu(x) on relu: f32[4]@cpu");
}

// --- Note [Canonicalize is exact], on the scalar formulas the kernels run ---

float eval(Op op, float a) { return ir::evalScalarF32(op, std::span<const float>(&a, 1)); }
float eval(Op op, float a, float b) {
  const float in[] = {a, b};
  return ir::evalScalarF32(op, in);
}
/// Same bits, or both NaN (Note [Eager equals compiled]).
bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

TEST(Canonicalize, RulesAreExactOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
  const float values[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, inf, -inf, nan, tiny, -tiny, big, -big, 3.0e-39f};
  for (float x : values) {
    SCOPED_TRACE(testing::Message() << "x = " << x << " (0x" << std::hex << std::bit_cast<uint32_t>(x) << ")");
    EXPECT_TRUE(same(eval(Op::mul, x, 1.0f), x)) << "x * 1";
    EXPECT_TRUE(same(eval(Op::mul, 1.0f, x), x)) << "1 * x";
    EXPECT_TRUE(same(eval(Op::mul, x, -1.0f), eval(Op::neg, x))) << "x * -1";
    EXPECT_TRUE(same(eval(Op::div, x, 1.0f), x)) << "x / 1";
    EXPECT_TRUE(same(eval(Op::div, x, -1.0f), eval(Op::neg, x))) << "x / -1";
    EXPECT_TRUE(same(eval(Op::add, x, -0.0f), x)) << "x + -0.0";
    EXPECT_TRUE(same(eval(Op::add, -0.0f, x), x)) << "-0.0 + x";
    EXPECT_TRUE(same(eval(Op::sub, x, 0.0f), x)) << "x - 0.0";
    EXPECT_TRUE(same(eval(Op::sub, -0.0f, x), eval(Op::neg, x))) << "-0.0 - x";
    EXPECT_TRUE(same(eval(Op::neg, eval(Op::neg, x)), x)) << "neg(neg(x))";
    EXPECT_TRUE(same(eval(Op::relu, eval(Op::relu, x)), eval(Op::relu, x))) << "relu(relu(x))";
    EXPECT_TRUE(same(eval(Op::maximum, x, x), x)) << "maximum(x, x)";
    EXPECT_TRUE(same(eval(Op::minimum, x, x), x)) << "minimum(x, x)";
    for (float y : values) {
      EXPECT_TRUE(same(eval(Op::add, x, eval(Op::neg, y)), eval(Op::sub, x, y))) << "x + neg(y), y = " << y;
      EXPECT_TRUE(same(eval(Op::add, eval(Op::neg, x), y), eval(Op::sub, y, x))) << "neg(x) + y, y = " << y;
      EXPECT_TRUE(same(eval(Op::sub, x, eval(Op::neg, y)), eval(Op::add, x, y))) << "x - neg(y), y = " << y;
    }
  }
  // And why the rules that are not there are not: -0.0 + 0.0 is +0.0.
  EXPECT_FALSE(same(eval(Op::add, -0.0f, 0.0f), -0.0f)) << "x + 0.0 -> x would be wrong";
  EXPECT_FALSE(same(eval(Op::sub, -0.0f, -0.0f), -0.0f)) << "x - (-0.0) -> x would be wrong";
  EXPECT_FALSE(same(eval(Op::sub, 0.0f, 0.0f), eval(Op::neg, 0.0f))) << "0.0 - x -> neg(x) would be wrong";
}

TEST(Canonicalize, NothingToDoReturnsFalse) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  g.setOutputs({bin(g, Op::add, x, constant(g, 0.0))});
  passes::PassContext context("canonicalize");
  EXPECT_FALSE(passes::runCanonicalize(g, context));
  EXPECT_EQ(g.numNodes(), 2);
}

}  // namespace
