// Lowering of fusion nodes: coalescing of the iteration domain, operand
// strides and inner-stride classes, signatures that ignore sizes, and
// compileGraph's refusal of nodes the CPU backend cannot run.
#include <gtest/gtest.h>

#include "common/graph_builders.h"
#include "codegen/codegen.h"
#include "passes/passes.h"
#include "runtime/error.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using codegen::InnerStride;
using ir::Op;

/// A fused graph computing relu(a + b) for inputs of the given shapes.
std::unique_ptr<ir::Graph> biasRelu(ir::Shape a, ir::Shape b) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->addInput(f32(std::move(a)));
  ir::Value* y = g->addInput(f32(std::move(b)));
  ir::Value* s = g->create(Op::add, std::vector<ir::Value*>{x, y})->output();
  g->setOutputs({g->create(Op::relu, std::vector<ir::Value*>{s})->output()});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

TEST(Coalesce, ContiguousDimsMergeIntoOne) {
  std::vector<int64_t> domain = {4, 8, 16};
  std::vector<std::vector<int64_t>> strides = {{128, 16, 1}, {128, 16, 1}};
  codegen::coalesce(domain, strides);
  EXPECT_EQ(domain, (std::vector<int64_t>{512}));
  EXPECT_EQ(strides, (std::vector<std::vector<int64_t>>{{1}, {1}}));
}

TEST(Coalesce, BroadcastDimsStaySeparateAndSizeOneDimsGo) {
  std::vector<int64_t> domain = {1, 6, 5, 1};
  std::vector<std::vector<int64_t>> strides = {{30, 5, 1, 1}, {0, 0, 1, 0}};
  codegen::coalesce(domain, strides);
  EXPECT_EQ(domain, (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(strides, (std::vector<std::vector<int64_t>>{{5, 1}, {0, 1}}));
}

TEST(Coalesce, ScalarAndEmptyDomainsAreRankOne) {
  std::vector<int64_t> scalar = {};
  std::vector<std::vector<int64_t>> s1 = {{}};
  codegen::coalesce(scalar, s1);
  EXPECT_EQ(scalar, (std::vector<int64_t>{1}));
  std::vector<int64_t> empty = {3, 0};
  std::vector<std::vector<int64_t>> s2 = {{0, 1}};
  codegen::coalesce(empty, s2);
  EXPECT_EQ(empty, (std::vector<int64_t>{0}));
}

TEST(Lowering, RowBiasIsRankTwoWithABroadcastOuterStride) {
  auto g = biasRelu({64, 32}, {32});
  auto lowered = codegen::lowerFusion(*g->nodes().at(0));
  const auto& k = lowered.kernel;
  EXPECT_EQ(k.rank, 2);
  ASSERT_EQ(k.numParams(), 3);
  EXPECT_EQ(k.params[0].inner, InnerStride::one);
  EXPECT_EQ(k.params[1].inner, InnerStride::one);
  EXPECT_TRUE(k.params[2].output);
  // sizes {64, 32}; strides x {32, 1}, b {0, 1}, out {32, 1}
  EXPECT_EQ(lowered.launch.args, (std::vector<int64_t>{64, 32, 32, 1, 0, 1, 32, 1}));
  EXPECT_EQ(lowered.launch.numel, 64 * 32);
}

TEST(Lowering, ColumnBroadcastHasAZeroInnerStride) {
  auto g = biasRelu({64, 32}, {64, 1});
  auto lowered = codegen::lowerFusion(*g->nodes().at(0));
  EXPECT_EQ(lowered.kernel.params[1].inner, InnerStride::zero);
}

TEST(Lowering, SignatureIgnoresSizesButNotThePattern) {
  auto a = codegen::lowerFusion(*biasRelu({64, 32}, {32})->nodes().at(0)).kernel;
  auto b = codegen::lowerFusion(*biasRelu({7, 1000}, {1000})->nodes().at(0)).kernel;
  auto c = codegen::lowerFusion(*biasRelu({64, 32}, {64, 1})->nodes().at(0)).kernel;
  auto d = codegen::lowerFusion(*biasRelu({64, 32}, {64, 32})->nodes().at(0)).kernel;
  EXPECT_EQ(a.signature(), b.signature());
  EXPECT_EQ(a.name, b.name);
  EXPECT_NE(a.signature(), c.signature());
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(d.rank, 1) << "same-shape operands coalesce to one loop";
}

TEST(CompileGraph, RefusesUnfusedElementwiseOpsBeforeCompilingAnything) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}));
  g.setOutputs({g.create(Op::relu, std::vector<ir::Value*>{x})->output()});
  try {
    codegen::compileGraph(g, Device::cpu());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run relu on cpu: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fuse-elementwise"), std::string::npos) << e.what();
  }
}

TEST(CompileGraph, SlotsForInputsAndResultsAndOneStepPerFusion) {
  auto g = biasRelu({16, 8}, {8});
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  EXPECT_EQ(exe.numKernels(), 1);
  EXPECT_EQ(exe.inputSlots, (std::vector<int>{0, 1}));
  EXPECT_EQ(exe.outputSlots, (std::vector<int>{2}));
  EXPECT_EQ(exe.slots.at(2).bytes, 16u * 8u * 4u);
}

}  // namespace
