// Lowering of reductions (codegen/lowering_reduction.cpp): the domain with
// the reduced dims innermost, each group coalesced alone, strides of
// strided inputs, the instructions of each reduction op, the thread-pool
// grain, compileGraph's steps; and a hand-made fusion of softmax (prologue,
// two reductions, a row epilogue) lowered to one three-pass kernel whose
// results equal the eager ops', as fuse-reductions builds it.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/codegen.h"
#include "common/graph_builders.h"
#include "frontend/kiln.h"
#include "ir/printer.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using codegen::InnerStride;
using codegen::ScalarInstr;
using ir::Op;

/// A graph of one reduction of an input of `shape`.
struct OneReduction {
  ir::Graph g;
  ir::Node* node = nullptr;
  OneReduction(Op op, ir::Shape shape, ir::Attributes attrs, DType dtype = DType::f32) {
    ir::Value* x = g.addInput({dtype, std::move(shape), Device::cpu()});
    node = g.create(op, std::vector<ir::Value*>{x}, std::move(attrs));
    g.setOutputs({node->output()});
  }
};

std::vector<int64_t> dims(std::initializer_list<int64_t> d) { return d; }

TEST(LowerReduction, RowsOfAMatrixAreOneOuterAndOneReducedDim) {
  OneReduction r(Op::sum, {64, 1024}, {{"dims", dims({1})}, {"keepdim", int64_t{0}}});
  codegen::LoweredKernel k = codegen::lowerReduction(*r.node);
  EXPECT_EQ(k.kernel.rank, 2);
  EXPECT_EQ(k.kernel.reduceRank, 1);
  EXPECT_EQ(k.launch.numel, 64);
  // sizes, then x's strides (outer, row), then out's (outer, 0 along the row).
  EXPECT_EQ(k.launch.args, (std::vector<int64_t>{64, 1024, 1024, 1, 1, 0}));
  EXPECT_EQ(k.kernel.params[0].inner, InnerStride::one);
  EXPECT_TRUE(k.kernel.params[1].outer);
  // f32 adds up in f64 and rounds once.
  EXPECT_NE(
      k.kernel.str().find("v1 = cast(v0) dtype=f64 : f64\nv2 = reduce.sum(v1) : f64\nv3 = cast(v2) dtype=f32 : f32"),
      std::string::npos)
      << k.kernel.str();
  EXPECT_EQ(codegen::reductionGrain(k.kernel, k.launch), 64) << "32768 / 1024 rows, rounded up to 64";
}

TEST(LowerReduction, ReducedDimsMoveInnermostAndCoalesceApart) {
  // Dim 0 of [R, C]: outer [C], the row walks x with stride C.
  OneReduction cols(Op::amax, {300, 7}, {{"dims", dims({0})}, {"keepdim", int64_t{1}}});
  codegen::LoweredKernel k = codegen::lowerReduction(*cols.node);
  EXPECT_EQ(k.launch.args, (std::vector<int64_t>{7, 300, 1, 7, 1, 0}));
  EXPECT_EQ(k.kernel.params[0].inner, InnerStride::any);
  // Dims 0 and 2 of [A, B, C]: outer [B], reduced [A, C], not mergeable.
  OneReduction ac(Op::mean, {3, 4, 5}, {{"dims", dims({0, -1})}});
  codegen::LoweredKernel m = codegen::lowerReduction(*ac.node);
  EXPECT_EQ(m.kernel.rank, 3);
  EXPECT_EQ(m.kernel.reduceRank, 2);
  EXPECT_EQ(m.launch.args, (std::vector<int64_t>{4, 3, 5, 5, 20, 1, 1, 0, 0}));
  // Dims 1 and 2 of [A, B, C]: the row is B*C contiguous elements.
  OneReduction bc(Op::sum, {3, 4, 5}, {{"dims", dims({1, 2})}});
  EXPECT_EQ(codegen::lowerReduction(*bc.node).launch.args, (std::vector<int64_t>{3, 20, 20, 1, 1, 0}));
  // Every dim: one output row.
  OneReduction all(Op::sum, {3, 4, 5}, {{"dims", dims({})}});
  EXPECT_EQ(codegen::lowerReduction(*all.node).launch.args, (std::vector<int64_t>{1, 60, 0, 1, 0, 0}));
}

TEST(LowerReduction, AStridedInputIsReadWhereItIs) {
  // x.t() of a contiguous [C=7, R=300]: shape [300, 7], strides [1, 300].
  OneReduction r(Op::sum, {300, 7}, {{"dims", dims({1})}});
  const ir::Layout layout{{1, 300}, 5};
  codegen::LoweredKernel k = codegen::lowerReduction(*r.node, std::span<const ir::Layout>(&layout, 1));
  EXPECT_EQ(k.launch.args, (std::vector<int64_t>{300, 7, 1, 300, 1, 0}));
  EXPECT_EQ(k.kernel.params[0].inner, InnerStride::any);
  ASSERT_EQ(k.bindings.size(), 2u);
  EXPECT_EQ(k.bindings[0].offset, 5);
  EXPECT_TRUE(k.bindings[1].output);
}

TEST(LowerReduction, SignaturesIgnoreSizes) {
  OneReduction a(Op::sum, {64, 1024}, {{"dims", dims({1})}});
  OneReduction b(Op::sum, {3, 5}, {{"dims", dims({-1})}});
  EXPECT_EQ(codegen::lowerReduction(*a.node).kernel.signature(), codegen::lowerReduction(*b.node).kernel.signature());
  OneReduction c(Op::sum, {3, 5}, {{"dims", dims({0})}});
  EXPECT_NE(codegen::lowerReduction(*a.node).kernel.signature(), codegen::lowerReduction(*c.node).kernel.signature())
      << "a strided row is another kernel";
}

TEST(LowerReduction, VarIsTwoPassesInF64) {
  OneReduction r(Op::var, {8, 100}, {{"dims", dims({1})}, {"correction", int64_t{0}}}, DType::f16);
  codegen::LoweredKernel k = codegen::lowerReduction(*r.node);
  const codegen::KernelStages stages = codegen::kernelStages(k.kernel);
  EXPECT_EQ(stages.numPasses, 2);
  EXPECT_NE(k.kernel.str().find("constant 0 (0x0000000000000000) : f64"), std::string::npos) << k.kernel.str();
  EXPECT_NE(k.kernel.str().find("cast(v12) dtype=f16 : f16"), std::string::npos) << k.kernel.str();
}

TEST(LowerReduction, CompileGraphSplitsByWholeRows) {
  OneReduction r(Op::sum, {4096, 16}, {{"dims", dims({1})}});
  runtime::Executable exe = codegen::compileGraph(r.g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 1u);
  const auto& step = std::get<runtime::KernelStep>(exe.steps[0]);
  EXPECT_EQ(step.shape.numel, 4096);
  EXPECT_EQ(step.shape.grain, 2048) << "32768 / 16 rows";
}

/// softmax over the last dim of x [R, C] as one fusion node, built by hand
/// (fuse-elementwise never makes one and the verifier does not accept one yet).
std::unique_ptr<ir::Graph> fusedSoftmax(int64_t R, int64_t C) {
  auto g = std::make_unique<ir::Graph>("fused_softmax");
  ir::Value* x = g->addInput(f32({R, C}));
  auto body = std::make_unique<ir::Graph>("fused");
  ir::Value* bx = body->addInput(f32({R, C}));
  const ir::Attributes keep = {{"dims", dims({1})}, {"keepdim", int64_t{1}}};
  ir::Value* m = body->create(Op::amax, std::vector<ir::Value*>{bx}, keep)->output();
  ir::Value* e = un(*body, Op::exp, bin(*body, Op::sub, bx, m));
  ir::Value* s = body->create(Op::sum, std::vector<ir::Value*>{e}, keep)->output();
  body->setOutputs({bin(*body, Op::div, e, s)});
  ir::Node* fusion = g->appendRaw(Op::fusion, std::vector<ir::Value*>{x}, {f32({R, C})});
  fusion->setBody(std::move(body));
  g->setOutputs({fusion->output()});
  return g;
}

TEST(LowerReduction, AFusedSoftmaxIsOneKernelOfThreePasses) {
  const int64_t R = 33, C = 200;
  auto g = fusedSoftmax(R, C);
  const ir::Node* fusion = g->nodes().back();
  ASSERT_TRUE(codegen::isReductionNode(*fusion));
  codegen::LoweredKernel k = codegen::lowerReduction(*fusion);
  EXPECT_EQ(codegen::kernelStages(k.kernel).numPasses, 3) << k.kernel.str();
  EXPECT_FALSE(k.kernel.params[1].outer) << "the result is stored along the row";
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  EXPECT_EQ(exe.numKernels(), 1);
  // Against the eager ops, bit for bit: the f64 sums add in the order the
  // eager sum kernel adds (Note [Fixed summation order]).
  Generator gen(3);
  Tensor x = randn({R, C}, gen);
  auto out = exe.run({x.impl()->storage});
  const float* got = static_cast<const float*>(out[0]->hostData());
  const Tensor e = kiln::exp(x - amax(x, {1}, true));  // what kiln::softmax computes, op by op
  const std::vector<float> want = (e / kiln::sum(e, {1}, true)).toVector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
}

TEST(LowerReduction, AFusedSoftmaxOverRowsOfOneElement) {
  // With a reduced extent of 1, x - amax(x) has the outer shape [R, 1]; it
  // is still a row value, since x is read along the row.
  auto g = fusedSoftmax(6, 1);
  codegen::LoweredKernel k = codegen::lowerReduction(*g->nodes().back());
  EXPECT_EQ(codegen::kernelStages(k.kernel).numPasses, 3) << k.kernel.str();
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  Tensor x = fromVector({1, -2, 3, INFINITY, 0, 7}, {6, 1});
  auto out = exe.run({x.impl()->storage});
  const float* got = static_cast<const float*>(out[0]->hostData());
  for (int i = 0; i < 6; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(got[i], 1.0f) << i;
  }
  EXPECT_TRUE(std::isnan(got[3])) << "exp(inf - inf) / ... is NaN";
}

TEST(LowerReduction, AnEpilogueInputIsReadOncePerRow) {
  // sum(x, dim 1) + b, b of the result's shape [R]: an outer input.
  auto g = std::make_unique<ir::Graph>("sum_bias");
  ir::Value* x = g->addInput(f32({5, 9}));
  ir::Value* b = g->addInput(f32({5}));
  auto body = std::make_unique<ir::Graph>("fused");
  ir::Value* bx = body->addInput(f32({5, 9}));
  ir::Value* bb = body->addInput(f32({5}));
  ir::Value* s = body->create(Op::sum, std::vector<ir::Value*>{bx}, {{"dims", dims({1})}})->output();
  body->setOutputs({bin(*body, Op::add, s, bb)});
  ir::Node* fusion = g->appendRaw(Op::fusion, std::vector<ir::Value*>{x, b}, {f32({5})});
  fusion->setBody(std::move(body));
  g->setOutputs({fusion->output()});
  codegen::LoweredKernel k = codegen::lowerReduction(*fusion);
  EXPECT_FALSE(k.kernel.params[0].outer);
  EXPECT_TRUE(k.kernel.params[1].outer);
  EXPECT_EQ(k.launch.args, (std::vector<int64_t>{5, 9, 9, 1, 1, 0, 1, 0}));
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  Tensor xs = arange(0, 45).to(DType::f32), bs = fromVector({1, 2, 3, 4, 5});
  auto out = exe.run({xs.impl()->storage, bs.impl()->storage});
  const float* got = static_cast<const float*>(out[0]->hostData());
  for (int r = 0; r < 5; ++r) EXPECT_EQ(got[r], static_cast<float>(9 * 9 * r + 36 + r + 1)) << r;
}

}  // namespace
