// fuse-elementwise: kernel counts for chains, diamonds, broadcasts and
// cycles, what the fusion nodes hold, and the remarks.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/graph_builders.h"
#include "common/expect_kernels.h"
#include "passes/passes.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;


void fuse(ir::Graph& g, passes::PassManager* pm = nullptr) {
  passes::PassManager local("fuse-elementwise");
  (pm ? *pm : local).run(g);
}

TEST(FuseElementwise, ChainIsOneKernel) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({16, 32}), "x");
  ir::Value* v = x;
  for (Op op : {Op::relu, Op::exp, Op::log, Op::tanh, Op::sigmoid, Op::neg, Op::sqrt, Op::relu}) v = un(g, op, v);
  g.setOutputs({v});
  EXPECT_KERNELS(g, 8);
  fuse(g);
  EXPECT_KERNELS(g, 1);
  ir::Node* fusion = g.nodes().at(0);
  ASSERT_EQ(fusion->op(), Op::fusion);
  EXPECT_EQ(fusion->body()->numNodes(), 8);
  EXPECT_EQ(fusion->numOutputs(), 1);
  EXPECT_EQ(g.outputs()[0], fusion->output());
}

TEST(FuseElementwise, ReluDropoutMulIsOneKernel) {
  // dropout is elementwise: it fuses with its producer and its consumer,
  // its seed and offset (0-d i64) becoming inputs of the fusion.
  ir::Graph g;
  ir::Value* x = g.addInput(f32({64, 32}), "x");
  ir::Value* seed = g.addInput({DType::i64, {}, Device::cpu()}, "seed");
  ir::Value* offset = g.addInput({DType::i64, {}, Device::cpu()}, "offset");
  ir::Value* d =
      g.create(Op::dropout, std::vector<ir::Value*>{un(g, Op::relu, x), seed, offset}, {{"p", 0.1}})->output();
  g.setOutputs({bin(g, Op::mul, d, x)});
  EXPECT_KERNELS(g, 3);
  fuse(g);
  EXPECT_KERNELS(g, 1);
  ir::Node* fusion = g.nodes().at(0);
  ASSERT_EQ(fusion->op(), Op::fusion);
  EXPECT_EQ(fusion->body()->numNodes(), 3);
  EXPECT_EQ(fusion->numInputs(), 3);
}

TEST(FuseElementwise, ConstantsAreCopiedIntoTheBody) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({8}), "x");
  ir::Value* c = g.createConstant(2.0, f32({}))->output();
  g.setOutputs({bin(g, Op::mul, un(g, Op::relu, x), c)});
  fuse(g);
  EXPECT_KERNELS(g, 1);
  ASSERT_EQ(g.numNodes(), 1) << "the top-level constant is gone: " << ir::printGraph(g);
  ir::Node* fusion = g.nodes()[0];
  EXPECT_EQ(fusion->numInputs(), 1) << "the constant is not an input";
  auto body = fusion->body()->nodes();
  EXPECT_TRUE(std::any_of(body.begin(), body.end(), [](ir::Node* n) { return n->op() == Op::constant; }));
}

TEST(FuseElementwise, BroadcastInputFusesButSmallerProducerDoesNot) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4, 8}), "x");
  ir::Value* b = g.addInput(f32({8}), "b");
  // relu(x + b): b is read broadcast by the kernel.
  ir::Value* y = un(g, Op::relu, bin(g, Op::add, x, b));
  // x * sigmoid(b): sigmoid runs over [8], a smaller domain: not fused.
  ir::Value* z = bin(g, Op::mul, x, un(g, Op::sigmoid, b));
  g.setOutputs({y, z});
  passes::PassManager pm("fuse-elementwise");
  fuse(g, &pm);
  // add+relu, sigmoid, mul: siblings that only share x are not fused (yet).
  EXPECT_KERNELS(g, 3);
  const auto& remarks = pm.remarks();
  EXPECT_TRUE(std::any_of(remarks.begin(), remarks.end(), [](const passes::Remark& r) {
    return r.message.find("refused sigmoid") != std::string::npos && r.message.find("different iteration domains") != std::string::npos;
  }));
  EXPECT_EQ(pm.statistics().at("fuse-elementwise").at("refused-domain"), 1);
}

TEST(FuseElementwise, IntermediateUsedOutsideBecomesASecondResult) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({128}), "x");
  ir::Value* a = un(g, Op::exp, x);
  ir::Value* b = un(g, Op::relu, a);
  g.setOutputs({b, a});
  fuse(g);
  EXPECT_KERNELS(g, 1);
  ir::Node* fusion = g.nodes()[0];
  ASSERT_EQ(fusion->numOutputs(), 2);
  EXPECT_EQ(g.outputs()[0]->node(), fusion);
  EXPECT_EQ(g.outputs()[1]->node(), fusion);
  EXPECT_NE(g.outputs()[0], g.outputs()[1]);
}

TEST(FuseElementwise, DiamondIsOneKernel) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({64}), "x");
  ir::Value* a = un(g, Op::relu, x);
  ir::Value* b = un(g, Op::exp, x);
  g.setOutputs({bin(g, Op::add, a, b)});
  fuse(g);
  EXPECT_KERNELS(g, 1);
}

TEST(FuseElementwise, RefusesAMergeThatWouldCreateACycle) {
  // relu -> opaque -> add and relu -> add: fusing relu with add would put
  // the opaque node (a fusion node the pass leaves alone, standing in for
  // a library call) both after and before the group.
  ir::Graph g;
  ir::Value* x = g.addInput(f32({64}), "x");
  ir::Value* a = un(g, Op::relu, x);
  // An opaque node (an existing fusion node) between a and c.
  auto body = std::make_unique<ir::Graph>("opaque");
  ir::Value* bi = body->addInput(f32({64}));
  body->setOutputs({body->create(Op::neg, std::vector<ir::Value*>{bi})->output()});
  ir::Node* opaque = g.appendRaw(Op::fusion, std::vector<ir::Value*>{a}, {f32({64})});
  opaque->setBody(std::move(body));
  ir::Value* c = bin(g, Op::add, a, opaque->output());
  g.setOutputs({c});
  passes::PassManager pm("fuse-elementwise");
  fuse(g, &pm);
  // relu and add cannot share a kernel: the opaque node needs relu's result
  // and add needs the opaque node's.
  EXPECT_KERNELS(g, 3);
  EXPECT_EQ(pm.statistics().at("fuse-elementwise").at("refused-cycle"), 1);
}

TEST(FuseElementwise, AGroupNobodyReadsIsRemovedNotOutlined) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({8}), "x");
  un(g, Op::exp, un(g, Op::neg, x));  // dead: no fusion node may have zero results
  g.setOutputs({un(g, Op::relu, x)});
  passes::PassManager pm("fuse-elementwise");
  pm.setVerifyEach(true);
  pm.run(g);
  EXPECT_KERNELS(g, 1);
  EXPECT_EQ(pm.statistics().at("fuse-elementwise").at("dead-ops-removed"), 2);
}

TEST(FuseElementwise, EveryElementwiseOpEndsInAFusionNode) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({3}), "x");
  g.setOutputs({un(g, Op::relu, x)});
  fuse(g);
  ASSERT_EQ(g.numNodes(), 1);
  EXPECT_EQ(g.nodes()[0]->op(), Op::fusion);
}

TEST(FuseElementwise, NothingToDoLeavesTheGraphAlone) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({3}), "x");
  g.setOutputs({x});
  passes::PassContext context("fuse-elementwise");
  EXPECT_FALSE(passes::runFuseElementwise(g, context));
  EXPECT_EQ(g.numNodes(), 0);
}

}  // namespace
