// fold-constants: constants broadcast into the result type, chains fold in
// one run, folded values are the kernels' bits (special values included),
// every dtype folds with its own formulas and integers exactly, and what is
// not folded: non-constant inputs, movement ops.
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

int64_t fold(ir::Graph& g) {
  passes::PassManager pm("fold-constants");
  pm.run(g);
  const auto& stats = pm.statistics().at("fold-constants");
  auto it = stats.find("nodes-folded");
  return it == stats.end() ? 0 : it->second;
}

/// The value of the constant node defining `v`, as kernels read it.
float valueOf(const ir::Value* v) {
  EXPECT_TRUE(v->node() && v->node()->op() == Op::constant) << "not a constant";
  if (!v->node() || v->node()->op() != Op::constant) return 0.0f;
  return static_cast<float>(ir::floatAttr(v->node()->attrs(), "value", "constant"));
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(FoldConstants, AddOfFillsIsAFillOfTheResultType) {
  ir::Graph g;
  g.setOutputs({bin(g, Op::add, constant(g, 1.0, {4, 8}), constant(g, 2.0))});
  EXPECT_EQ(fold(g), 1);
  ASSERT_EQ(g.numNodes(), 1) << "the input constants are gone: " << ir::printGraph(g);
  const ir::Value* out = g.outputs()[0];
  EXPECT_EQ(out->type(), f32({4, 8}));
  EXPECT_EQ(valueOf(out), 3.0f);
}

TEST(FoldConstants, ChainFoldsInOneRunWithTheKernelsBits) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({16}), "x");
  ir::Value* c = constant(g, 0.7);
  ir::Value* e = un(g, Op::exp, bin(g, Op::mul, c, c));
  ir::Value* s = un(g, Op::sigmoid, un(g, Op::tanh, e));
  g.setOutputs({bin(g, Op::add, x, s)});
  EXPECT_EQ(fold(g), 4);
  ASSERT_EQ(g.numNodes(), 2) << ir::printGraph(g);
  const float c7 = 0.7f, sq = c7 * c7;
  const float ex = ir::evalScalarF32(Op::exp, std::span<const float>(&sq, 1));
  const float th = ir::evalScalarF32(Op::tanh, std::span<const float>(&ex, 1));
  const float expected = ir::evalScalarF32(Op::sigmoid, std::span<const float>(&th, 1));
  ir::Node* add = g.nodes()[1];
  EXPECT_EQ(add->input(0), x);
  EXPECT_EQ(bits(valueOf(add->input(1))), bits(expected));
}

TEST(FoldConstants, TheNewerOpsFoldWithTheirAttributes) {
  // gelu's `approximate` reaches the formula: the two forms fold to their
  // own values, each the evaluator's bits; pow and sin fold like the rest.
  ir::Graph g;
  ir::Value* c = constant(g, -0.9);
  ir::Value* exact = un(g, Op::gelu, c);
  ir::Value* tanhForm = un(g, Op::gelu, c, {{"approximate", int64_t{1}}});
  ir::Value* p = bin(g, Op::pow, constant(g, 1.5), un(g, Op::sin, constant(g, 2.0)));
  g.setOutputs({exact, tanhForm, p});
  EXPECT_EQ(fold(g), 4);
  ASSERT_EQ(g.numNodes(), 3) << ir::printGraph(g);
  const float x = -0.9f, two = 2.0f;
  const float wantExact = ir::evalScalarF32(Op::gelu, std::span<const float>(&x, 1));
  const float wantTanh = ir::evalScalarF32(Op::gelu, std::span<const float>(&x, 1), {{"approximate", int64_t{1}}});
  const float sine = ir::evalScalarF32(Op::sin, std::span<const float>(&two, 1));
  const float powIn[] = {1.5f, sine};
  EXPECT_EQ(bits(valueOf(g.outputs()[0])), bits(wantExact));
  EXPECT_EQ(bits(valueOf(g.outputs()[1])), bits(wantTanh));
  EXPECT_NE(wantExact, wantTanh) << "the attribute must matter";
  EXPECT_EQ(bits(valueOf(g.outputs()[2])), bits(ir::evalScalarF32(Op::pow, powIn)));
  EXPECT_NEAR(valueOf(g.outputs()[0]), -0.9 / 2 * std::erfc(0.9 / std::sqrt(2.0)), 1e-7);
}

TEST(FoldConstants, ComputesInF32NotInDouble) {
  // 0.1 + 0.2 as kernels compute it: float(0.1) + float(0.2), stored exactly.
  ir::Graph g;
  g.setOutputs({bin(g, Op::add, constant(g, 0.1), constant(g, 0.2))});
  fold(g);
  const double stored = ir::floatAttr(g.outputs()[0]->node()->attrs(), "value", "constant");
  EXPECT_EQ(stored, static_cast<double>(0.1f + 0.2f));
  EXPECT_NE(stored, 0.1 + 0.2);
}

TEST(FoldConstants, SpecialValuesFoldToTheFormulasResults) {
  struct Case {
    Op op;
    float a, b;
    float expected;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Case cases[] = {
      {Op::relu, -0.0f, 0, -0.0f},   {Op::neg, 0.0f, 0, -0.0f},         {Op::log, 0.0f, 0, -inf},
      {Op::log, -1.0f, 0, nan},      {Op::sqrt, -0.0f, 0, -0.0f},       {Op::div, 1.0f, 0.0f, inf},
      {Op::div, 1.0f, -0.0f, -inf},  {Op::maximum, 0.0f, -0.0f, -0.0f}, {Op::maximum, -0.0f, 0.0f, 0.0f},
      {Op::maximum, nan, 1.0f, nan}, {Op::minimum, 1.0f, nan, nan},     {Op::add, -0.0f, 0.0f, 0.0f},
      {Op::exp, -100.0f, 0, 0.0f},   {Op::exp, 100.0f, 0, inf},         {Op::sub, inf, inf, nan},
  };
  for (const Case& k : cases) {
    ir::Graph g;
    ir::Value* a = constant(g, k.a);
    bool binary = ir::opInfo(k.op).arity == 2;
    g.setOutputs({binary ? bin(g, k.op, a, constant(g, k.b)) : un(g, k.op, a)});
    ASSERT_EQ(fold(g), 1) << ir::opName(k.op);
    const float got = valueOf(g.outputs()[0]);
    const float in[] = {k.a, k.b};
    const float formula = ir::evalScalarF32(k.op, std::span<const float>(in, binary ? 2 : 1));
    std::string what = std::string(ir::opName(k.op)) + "(" + std::to_string(k.a) + ", " + std::to_string(k.b) + ")";
    if (std::isnan(k.expected)) {
      EXPECT_TRUE(std::isnan(got)) << what;
    } else {
      EXPECT_EQ(bits(got), bits(k.expected)) << what;
      EXPECT_EQ(bits(got), bits(formula)) << what;
    }
  }
}

TEST(FoldConstants, NonConstantInputsAreNotFolded) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* c = constant(g, 2.0);
  ir::Value* y = bin(g, Op::mul, x, c);
  ir::Value* z = un(g, Op::exp, y);
  g.setOutputs({z});
  EXPECT_EQ(fold(g), 0);
  EXPECT_EQ(g.numNodes(), 3);
}

TEST(FoldConstants, AConstantStillUsedElsewhereStays) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* c = constant(g, 2.0);
  ir::Value* folded = un(g, Op::neg, c);
  ir::Value* y = bin(g, Op::mul, x, c);
  g.setOutputs({y, folded, c});
  EXPECT_EQ(fold(g), 1);
  ASSERT_EQ(g.numNodes(), 3) << ir::printGraph(g);
  EXPECT_EQ(y->node()->input(1), c);
  EXPECT_EQ(g.outputs()[2], c);
  EXPECT_EQ(valueOf(g.outputs()[1]), -2.0f);
}

TEST(FoldConstants, MovementOpsAreNotFolded) {
  ir::Graph g;
  ir::Value* r =
      g.create(Op::reshape, std::vector<ir::Value*>{constant(g, 1.0, {2, 3})}, {{"shape", std::vector<int64_t>{6}}})
          ->output();
  g.setOutputs({r});
  EXPECT_EQ(fold(g), 0);
  EXPECT_EQ(g.numNodes(), 2);
}

/// The constant node defining `v`: its value attribute as it is.
ir::Number numberOf(const ir::Value* v) {
  EXPECT_TRUE(v->node() && v->node()->op() == Op::constant) << "not a constant";
  return ir::numberAttr(v->node()->attrs(), "value", "constant");
}

TEST(FoldConstants, IntegersFoldExactly) {
  // Note [Integer constants are exact]: 2^60 + 2 and 2^60 are one double;
  // as i64 constants they stay apart, their sum wraps, and the results are
  // int attributes with every bit.
  const ir::TensorType i64{DType::i64, {}, Device::cpu()};
  const int64_t big = (int64_t{1} << 60) + 2, max = std::numeric_limits<int64_t>::max();
  ir::Graph g;
  ir::Value* a = g.createConstant(big, i64)->output();
  ir::Value* b = g.createConstant(int64_t{1} << 60, i64)->output();
  ir::Value* m = g.createConstant(max, i64)->output();
  g.setOutputs({bin(g, Op::sub, a, b), bin(g, Op::eq, a, b), bin(g, Op::add, m, a), bin(g, Op::mul, a, a)});
  EXPECT_EQ(fold(g), 4);
  ASSERT_EQ(g.numNodes(), 4) << ir::printGraph(g);
  EXPECT_EQ(numberOf(g.outputs()[0]), ir::Number(int64_t{2}));
  EXPECT_EQ(numberOf(g.outputs()[1]), ir::Number(int64_t{0})) << "bool false";
  const uint64_t wrapped = static_cast<uint64_t>(max) + static_cast<uint64_t>(big);
  EXPECT_EQ(numberOf(g.outputs()[2]), ir::Number(static_cast<int64_t>(wrapped)));
  const uint64_t square = static_cast<uint64_t>(big) * static_cast<uint64_t>(big);
  EXPECT_EQ(numberOf(g.outputs()[3]), ir::Number(static_cast<int64_t>(square)));
}

TEST(FoldConstants, OtherDtypesFoldWithTheirFormulas) {
  // f64 in f64 (not the f32 sum), i32 wrapping, a cast of an i64 beyond
  // 2^53 to f32 rounded once, and f16 rounded to f16: each the evaluator's.
  ir::Graph g;
  const ir::TensorType f64{DType::f64, {}, Device::cpu()}, i32{DType::i32, {}, Device::cpu()},
      i64{DType::i64, {}, Device::cpu()}, f16{DType::f16, {}, Device::cpu()};
  ir::Value* d = bin(g, Op::add, g.createConstant(0.1, f64)->output(), g.createConstant(0.2, f64)->output());
  ir::Value* w = bin(g, Op::add, g.createConstant(int64_t{2147483647}, i32)->output(),
                     g.createConstant(int64_t{1}, i32)->output());
  const int64_t s = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  ir::Value* c =
      g.create(Op::cast, std::vector<ir::Value*>{g.createConstant(s, i64)->output()}, {{"dtype", DType::f32}})
          ->output();
  ir::Value* h = bin(g, Op::mul, g.createConstant(0.1, f16)->output(), g.createConstant(3.0, f16)->output());
  g.setOutputs({d, w, c, h});
  EXPECT_EQ(fold(g), 4);
  ASSERT_EQ(g.numNodes(), 4) << ir::printGraph(g);
  EXPECT_EQ(numberOf(g.outputs()[0]), ir::Number(0.1 + 0.2));
  EXPECT_EQ(numberOf(g.outputs()[1]), ir::Number(int64_t{-2147483648}));
  EXPECT_EQ(numberOf(g.outputs()[2]), ir::Number(static_cast<double>(static_cast<float>(s))));
  EXPECT_NE(static_cast<float>(s), static_cast<float>(static_cast<double>(s))) << "one rounding, not two";
  const ir::ScalarValue in[] = {ir::ScalarValue::of(DType::f16, 0.1), ir::ScalarValue::of(DType::f16, 3.0)};
  EXPECT_EQ(numberOf(g.outputs()[3]), ir::Number(ir::evalScalar(Op::mul, in).f));
}

TEST(FoldConstants, KeepsTheFoldedValuesName) {
  ir::Graph g;
  ir::Value* s = bin(g, Op::add, constant(g, 1.0), constant(g, 1.0));
  s->setName("two");
  g.setOutputs({s});
  fold(g);
  EXPECT_EQ(g.outputs()[0]->name(), "two");
}

}  // namespace
