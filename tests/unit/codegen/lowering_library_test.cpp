// Lowering of library nodes (codegen/lowering_library.h) and compileGraph's
// library steps: the call's arguments carry each operand's strides (a
// transposed weight read through, a broadcast batch dim as stride 0), a
// view op read only by library calls is an alias with no step (Note
// [Library calls read views]), and supports() accepts library nodes and
// such views but not a view something else reads.
#include "codegen/lowering_library.h"

#include <gtest/gtest.h>

#include "codegen/compile_graph.h"
#include "codegen/target.h"
#include "runtime/blas.h"
#include "runtime/indexing.h"

namespace {

using namespace kiln;
using ir::Op;

ir::TensorType f32(ir::Shape s) { return {DType::f32, std::move(s), Device::cpu()}; }

TEST(LowerLibrary, MatmulArgumentsCarryStridesAndBroadcastBatchDims) {
  ir::Graph g("mm");
  ir::Value* a = g.addInput(f32({2, 1, 4, 8}));
  ir::Value* b = g.addInput(f32({3, 8, 5}));
  ir::Node* mm = g.create(Op::matmul, std::vector<ir::Value*>{a, b});
  // b laid out as a transposed [3, 5, 8] storage: strides [40, 1, 8].
  const std::vector<ir::Layout> layouts = {ir::contiguousLayout({2, 1, 4, 8}), ir::Layout{{40, 1, 8}, 0}};
  const codegen::LibraryFunctions& cpu = codegen::targetFor(Device::cpu()).libraries();
  codegen::LoweredCall call = codegen::lowerLibrary(*mm, layouts, cpu);
  EXPECT_EQ(call.name, "matmul_f32");
  EXPECT_EQ(call.fn, cpu.matmul.fn);
  EXPECT_FALSE(call.recordable);
  EXPECT_EQ(call.fn, &runtime::onHost<&runtime::matmul>);
  const runtime::MatmulCall c = runtime::MatmulCall::decode(call.args);
  EXPECT_EQ(c.batch, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.aBatchStrides, (std::vector<int64_t>{32, 0})) << "a is broadcast over the 3";
  EXPECT_EQ(c.bBatchStrides, (std::vector<int64_t>{0, 40})) << "b is broadcast over the 2";
  EXPECT_EQ(std::vector<int64_t>({c.m, c.n, c.k}), std::vector<int64_t>({4, 5, 8}));
  EXPECT_EQ(std::vector<int64_t>({c.aRowStride, c.aColStride, c.bRowStride, c.bColStride}),
            std::vector<int64_t>({8, 1, 1, 8}));
}

TEST(CompileGraph, ATransposeReadByMatmulIsAnAliasNotACopy) {
  ir::Graph g("linear");
  ir::Value* x = g.addInput(f32({4, 8}));
  ir::Value* w = g.addInput(f32({16, 8}));
  ir::Node* t = g.create(Op::transpose, std::vector<ir::Value*>{w}, {{"perm", std::vector<int64_t>{1, 0}}});
  ir::Node* mm = g.create(Op::matmul, std::vector<ir::Value*>{x, t->output()});
  g.setOutputs({mm->output()});
  EXPECT_TRUE(codegen::supports(*t, Device::cpu()));
  EXPECT_TRUE(codegen::supports(*mm, Device::cpu()));
  runtime::Executable exe = codegen::compileGraph(g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 1u);
  const auto& step = std::get<runtime::LibraryStep>(exe.steps[0]);
  EXPECT_EQ(step.name, "matmul_f32");
  EXPECT_EQ(step.slots, (std::vector<int>{0, 1, 2})) << "w's own slot, no copy";
  const runtime::MatmulCall c = runtime::MatmulCall::decode(step.args);
  EXPECT_EQ(c.bRowStride, 1);
  EXPECT_EQ(c.bColStride, 8);
}

TEST(CompileGraph, ASliceReadByIndexSelectIsBoundAtItsOffset) {
  ir::Graph g("gather");
  ir::Value* x = g.addInput(f32({10, 6}));
  ir::Value* i = g.addInput({DType::i64, {3}, Device::cpu()});
  ir::Node* s = g.create(Op::slice, std::vector<ir::Value*>{x},
                         {{"dim", int64_t{1}}, {"start", int64_t{2}}, {"end", int64_t{6}}, {"step", int64_t{2}}});
  ir::Node* sel = g.create(Op::index_select, std::vector<ir::Value*>{s->output(), i}, {{"dim", int64_t{0}}});
  g.setOutputs({sel->output()});
  runtime::Executable exe = codegen::compileGraph(g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 1u);
  const auto& step = std::get<runtime::LibraryStep>(exe.steps[0]);
  EXPECT_EQ(step.offsets, (std::vector<int64_t>{2 * 4, 0, 0})) << "x from element 2";
  const runtime::IndexCall c = runtime::IndexCall::decode(step.args);
  EXPECT_EQ(c.strides, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{10, 2}));
}

TEST(CompileGraph, SupportsAViewOnlyWhenOnlyLibraryCallsReadIt) {
  ir::Graph g("mixed");
  ir::Value* w = g.addInput(f32({16, 8}));
  ir::Node* t = g.create(Op::transpose, std::vector<ir::Value*>{w}, {{"perm", std::vector<int64_t>{1, 0}}});
  ir::Node* r = g.create(Op::relu, std::vector<ir::Value*>{t->output()});
  g.setOutputs({r->output()});
  std::string why;
  EXPECT_FALSE(codegen::supports(*t, Device::cpu(), &why));
  EXPECT_EQ(why,
            "movement ops run inside fusion nodes, unless only library calls read them (run fuse-elementwise first)");
}

}  // namespace
