// cse: what is merged (same op, inputs, attributes, types; add and mul in
// either operand order; equal constants) and what must not be (other
// attributes, other types, 0.0 and -0.0, maximum with its operands swapped,
// fusion nodes), and that uses and graph outputs follow the kept node.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "common/graph_builders.h"
#include "ir/printer.h"
#include "ir/scalar_eval.h"
#include "passes/passes.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;


/// Runs cse; returns nodes-removed.
int64_t cse(ir::Graph& g, bool verify = true) {
  passes::PassManager pm("cse");
  pm.setVerifyEach(verify);
  pm.run(g);
  const auto& stats = pm.statistics().at("cse");
  auto it = stats.find("nodes-removed");
  return it == stats.end() ? 0 : it->second;
}

TEST(Cse, MergesTheSameOpOnTheSameInputsAndRedirectsOutputs) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* a = un(g, Op::relu, x);
  ir::Value* b = un(g, Op::relu, x);
  ir::Value* c = bin(g, Op::add, b, x);
  g.setOutputs({a, b, c});
  EXPECT_EQ(cse(g), 1);
  ASSERT_EQ(g.numNodes(), 2) << ir::printGraph(g);
  EXPECT_EQ(g.outputs()[0], a);
  EXPECT_EQ(g.outputs()[1], a) << "a returned duplicate is the kept value";
  EXPECT_EQ(c->node()->input(0), a);
  EXPECT_EQ(a->uses().size(), 1u);
}

TEST(Cse, RepeatedChainGoesInOneRun) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* a = un(g, Op::exp, un(g, Op::relu, x));
  ir::Value* b = un(g, Op::exp, un(g, Op::relu, x));
  g.setOutputs({bin(g, Op::sub, a, b)});
  EXPECT_EQ(cse(g), 2);
  ASSERT_EQ(g.numNodes(), 3) << ir::printGraph(g);
  ir::Node* sub = g.nodes()[2];
  EXPECT_EQ(sub->input(0), a);
  EXPECT_EQ(sub->input(1), a);
  passes::PassContext again("cse");
  EXPECT_FALSE(passes::runCse(g, again)) << "a second run finds nothing";
}

TEST(Cse, AddAndMulMergeInEitherOperandOrder) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  ir::Value* s1 = bin(g, Op::add, x, y);
  ir::Value* s2 = bin(g, Op::add, y, x);
  ir::Value* p1 = bin(g, Op::mul, y, s1);
  ir::Value* p2 = bin(g, Op::mul, s2, y);
  g.setOutputs({s1, s2, p1, p2});
  EXPECT_EQ(cse(g), 2);
  EXPECT_EQ(g.outputs()[1], s1);
  EXPECT_EQ(g.outputs()[3], p1);
  EXPECT_EQ(p1->node()->input(0), y) << "the kept node keeps its operand order";
}

TEST(Cse, NonCommutativeOpsDoNotMergeSwapped) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  g.setOutputs({bin(g, Op::sub, x, y), bin(g, Op::sub, y, x), bin(g, Op::div, x, y), bin(g, Op::div, y, x)});
  EXPECT_EQ(cse(g), 0);
  EXPECT_EQ(g.numNodes(), 4);
}

TEST(Cse, MaximumAndMinimumDoNotMergeSwappedBecauseOfSignedZeros) {
  // Why: the formula returns the second operand on a tie.
  const float pz = 0.0f, nz = -0.0f;
  const float ab[] = {pz, nz}, ba[] = {nz, pz};
  EXPECT_NE(std::bit_cast<uint32_t>(ir::evalScalarF32(Op::maximum, ab)),
            std::bit_cast<uint32_t>(ir::evalScalarF32(Op::maximum, ba)));
  EXPECT_NE(std::bit_cast<uint32_t>(ir::evalScalarF32(Op::minimum, ab)),
            std::bit_cast<uint32_t>(ir::evalScalarF32(Op::minimum, ba)));

  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  g.setOutputs({bin(g, Op::maximum, x, y), bin(g, Op::maximum, y, x), bin(g, Op::minimum, x, y),
                bin(g, Op::minimum, y, x), bin(g, Op::maximum, x, y)});
  EXPECT_EQ(cse(g), 1) << "only the repeated maximum(x, y) goes";
  EXPECT_EQ(g.outputs()[4], g.outputs()[0]);
  EXPECT_NE(g.outputs()[1], g.outputs()[0]);
  EXPECT_NE(g.outputs()[3], g.outputs()[2]);
}

TEST(Cse, DifferentInputsDoNotMerge) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* y = g.addInput(f32({4}), "y");
  g.setOutputs({un(g, Op::exp, x), un(g, Op::exp, y), un(g, Op::log, x)});
  EXPECT_EQ(cse(g), 0);
}

TEST(Cse, ConstantsMergeByValueBitsAndType) {
  ir::Graph g;
  ir::Value* one = constant(g, 1.0);
  ir::Value* oneAgain = constant(g, 1.0);
  ir::Value* two = constant(g, 2.0);
  ir::Value* oneWide = constant(g, 1.0, {4});  // another type
  ir::Value* pz = constant(g, 0.0);
  ir::Value* nz = constant(g, -0.0);  // other bits than 0.0
  ir::Value* nan = constant(g, std::nan(""));
  ir::Value* nanAgain = constant(g, std::nan(""));  // the same bits
  g.setOutputs({one, oneAgain, two, oneWide, pz, nz, nan, nanAgain});
  EXPECT_EQ(cse(g), 2);
  const auto out = g.outputs();
  EXPECT_EQ(out[1], one);
  EXPECT_NE(out[2], one);
  EXPECT_NE(out[3], one);
  EXPECT_NE(out[5], pz) << "0.0 and -0.0 differ";
  EXPECT_EQ(out[7], nan);
}

TEST(Cse, UsersOfMergedConstantsMergeToo) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* a = bin(g, Op::mul, x, constant(g, 0.5));
  ir::Value* b = bin(g, Op::mul, x, constant(g, 0.5));
  g.setOutputs({a, b});
  EXPECT_EQ(cse(g), 2) << ir::printGraph(g);
  EXPECT_EQ(g.numNodes(), 2);
  EXPECT_EQ(g.outputs()[1], a);
}

TEST(Cse, DifferentAttributesDoNotMerge) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({2, 3, 4}), "x");
  ir::Value* t1 = un(g, Op::transpose, x, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  ir::Value* t2 = un(g, Op::transpose, x, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  ir::Value* t3 = un(g, Op::transpose, x, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  ir::Value* r1 = un(g, Op::reshape, x, {{"shape", std::vector<int64_t>{6, 4}}});
  ir::Value* r2 = un(g, Op::reshape, x, {{"shape", std::vector<int64_t>{2, 12}}});
  ir::Value* r3 = un(g, Op::reshape, x, {{"shape", std::vector<int64_t>{6, 4}}});
  g.setOutputs({t1, t2, t3, r1, r2, r3});
  EXPECT_EQ(cse(g), 2);
  const auto out = g.outputs();
  EXPECT_NE(out[1], t1);
  EXPECT_EQ(out[2], t1);
  EXPECT_NE(out[4], r1);
  EXPECT_EQ(out[5], r1);
}

TEST(Cse, DifferentResultTypesDoNotMerge) {
  // Built raw: the same op on the same input claiming two result types (as
  // a future op whose type comes from an attribute-free rule might).
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* a = g.appendRaw(Op::relu, std::vector<ir::Value*>{x}, {f32({4})})->output();
  ir::Value* b = g.appendRaw(Op::relu, std::vector<ir::Value*>{x}, {{DType::f32, {4}, Device::cuda(0)}})->output();
  g.setOutputs({a, b});
  EXPECT_EQ(cse(g, /*verify=*/false), 0);  // the graph is invalid on purpose
}

TEST(Cse, FusionNodesAreLeftAlone) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  for (int i = 0; i < 2; ++i) {
    auto body = std::make_unique<ir::Graph>("fused");
    ir::Value* bi = body->addInput(f32({4}));
    body->setOutputs({body->create(Op::neg, std::vector<ir::Value*>{bi})->output()});
    g.appendRaw(Op::fusion, std::vector<ir::Value*>{x}, {f32({4})})->setBody(std::move(body));
  }
  g.setOutputs({g.nodes()[0]->output(), g.nodes()[1]->output()});
  EXPECT_EQ(cse(g), 0);
  EXPECT_EQ(g.numNodes(), 2);
}

}  // namespace
