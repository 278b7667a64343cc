// Lowering of strided inputs and movement ops: kernel parameters read views
// through their strides and offsets (inner stride class `any` or 0 where
// needed, coalescing where the strides allow), signatures ignore sizes but
// not the stride pattern, a cat is one kernel per input writing at an
// offset, and compileGraph sizes input slots by their extent. (GPU kernels
// that read views and a cat's pieces are built and run by the tests of
// gpu_kernel_cases.h.)
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>

#include "codegen/codegen.h"
#include "common/graph_builders.h"
#include "ir/printer.h"
#include "passes/passes.h"
#include "runtime/error.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using codegen::InnerStride;
using ir::Op;

/// A fused graph of `build` over inputs of the given shapes.
std::unique_ptr<ir::Graph> fused(std::vector<ir::Shape> shapes,
                                 const std::function<ir::Value*(ir::Graph&, std::vector<ir::Value*>)>& build) {
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> in;
  for (auto& s : shapes) in.push_back(g->addInput(f32(std::move(s))));
  g->setOutputs({build(*g, in)});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

ir::Value* transpose(ir::Graph& g, ir::Value* x) {
  return un(g, Op::transpose, x, {{"perm", std::vector<int64_t>{1, 0}}});
}

ir::Value* slice(ir::Graph& g, ir::Value* x, int64_t dim, int64_t start, int64_t end, int64_t step = 1) {
  return un(g, Op::slice, x, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}

const ir::Node& only(const ir::Graph& g) {
  EXPECT_EQ(g.numNodes(), 1) << ir::printGraph(g);
  return *g.nodes().at(0);
}

TEST(LoweringViews, AStridedInputLayoutIsAnAnyInnerStride) {
  auto g = fused({{4, 6}}, [](ir::Graph& g, auto in) { return un(g, Op::relu, in[0]); });
  const ir::Layout transposed{{1, 4}, 0};  // a [4,6] view of a [6,4] buffer
  auto lowered = codegen::lowerFusion(only(*g), std::vector<ir::Layout>{transposed});
  EXPECT_EQ(lowered.kernel.rank, 2);
  EXPECT_EQ(lowered.kernel.params[0].inner, InnerStride::any);
  EXPECT_EQ(lowered.kernel.params[1].inner, InnerStride::one);
  EXPECT_EQ(lowered.launch.args, (std::vector<int64_t>{4, 6, 1, 4, 6, 1}));
  // Contiguous rows of a larger buffer still coalesce into one loop.
  auto rows = codegen::lowerFusion(only(*g), std::vector<ir::Layout>{{{6, 1}, 12}});
  EXPECT_EQ(rows.kernel.rank, 1);
  EXPECT_EQ(rows.bindings[0].offset, 12);
  // Every other column of a [4,12] buffer is every other element: rank 1,
  // inner stride 2.
  auto cols = codegen::lowerFusion(only(*g), std::vector<ir::Layout>{{{12, 2}, 0}});
  EXPECT_EQ(cols.kernel.rank, 1);
  EXPECT_EQ(cols.kernel.params[0].inner, InnerStride::any);
  EXPECT_EQ(cols.launch.args, (std::vector<int64_t>{24, 2, 1}));
  // The first 3 of 6 columns: rows do not merge.
  auto half = codegen::lowerFusion(only(*g), std::vector<ir::Layout>{{{12, 1}, 0}});
  EXPECT_EQ(half.kernel.rank, 2);
  EXPECT_EQ(half.kernel.params[0].inner, InnerStride::one);
}

TEST(LoweringViews, SignaturesIgnoreSizesButNotTheStridePattern) {
  auto a = fused({{4, 6}}, [](ir::Graph& g, auto in) { return un(g, Op::exp, in[0]); });
  auto b = fused({{7, 9}}, [](ir::Graph& g, auto in) { return un(g, Op::exp, in[0]); });
  const auto ta = codegen::lowerFusion(only(*a), std::vector<ir::Layout>{{{1, 4}, 0}}).kernel;
  const auto tb = codegen::lowerFusion(only(*b), std::vector<ir::Layout>{{{1, 7}, 0}}).kernel;
  const auto ca = codegen::lowerFusion(only(*a)).kernel;
  const auto ea = codegen::lowerFusion(only(*a), std::vector<ir::Layout>{{{1, 0}, 0}}).kernel;
  EXPECT_EQ(ta.signature(), tb.signature()) << "transposed inputs of any size: one kernel";
  EXPECT_NE(ta.signature(), ca.signature());
  EXPECT_NE(ta.signature(), ea.signature()) << "inner stride 0 is its own class";
  EXPECT_EQ(ea.params[0].inner, InnerStride::zero);
}

TEST(LoweringViews, MovementOpsInTheBodyRemapTheLoads) {
  // relu(x.t()[1:5:2]) + y: the body reads x through a transpose and a slice.
  auto g = fused({{8, 6}, {2, 8}}, [](ir::Graph& g, auto in) {
    ir::Value* v = slice(g, transpose(g, in[0]), 0, 1, 5, 2);  // [2, 8], strides {2, 6}, offset 1
    return bin(g, Op::add, un(g, Op::relu, v), in[1]);
  });
  const ir::Node& f = only(*g);
  ASSERT_EQ(f.numInputs(), 2) << ir::printGraph(*g);
  auto lowered = codegen::lowerFusion(f);
  ASSERT_EQ(lowered.kernel.numParams(), 3);
  EXPECT_EQ(lowered.bindings[0].index, 0);
  EXPECT_EQ(lowered.bindings[0].offset, 1);
  EXPECT_EQ(lowered.bindings[1].offset, 0);
  EXPECT_EQ(lowered.kernel.params[0].inner, InnerStride::any);
  EXPECT_EQ(lowered.launch.args, (std::vector<int64_t>{2, 8, 2, 6, 8, 1, 8, 1}));
}

TEST(LoweringViews, OneInputReadTwiceIsTwoParameters) {
  auto g = fused({{5, 5}}, [](ir::Graph& g, auto in) { return bin(g, Op::add, in[0], transpose(g, in[0])); });
  auto lowered = codegen::lowerFusion(only(*g));
  ASSERT_EQ(lowered.kernel.numParams(), 3);
  EXPECT_EQ(lowered.bindings[0].index, 0);
  EXPECT_EQ(lowered.bindings[1].index, 0);
  EXPECT_EQ(lowered.kernel.params[0].inner, InnerStride::one);
  EXPECT_EQ(lowered.kernel.params[1].inner, InnerStride::any);
}

TEST(LoweringViews, CatIsOneKernelPerInputAtItsOffset) {
  auto g = fused({{2, 3}, {2, 1}, {3, 2}}, [](ir::Graph& g, auto in) {
    return g.create(Op::cat, std::vector<ir::Value*>{in[0], in[1], transpose(g, in[2])}, {{"dim", int64_t{1}}})
        ->output();
  });
  const ir::Node& f = only(*g);
  auto kernels = codegen::lowerFusionKernels(f);
  ASSERT_EQ(kernels.size(), 3u);
  const int64_t offsets[] = {0, 3, 4};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(kernels[i].bindings.size(), 2u);
    EXPECT_EQ(f.input(kernels[i].bindings[0].index), g->input(i)) << "kernel " << i << " copies input " << i;
    EXPECT_TRUE(kernels[i].bindings[1].output);
    EXPECT_EQ(kernels[i].bindings[1].offset, offsets[i]) << "input " << i;
  }
  // The transposed [2,3] piece: input strides {1, 2}, the [2,7] result's {7, 1}.
  EXPECT_EQ(kernels[2].launch.args, (std::vector<int64_t>{2, 3, 1, 2, 7, 1}));
  EXPECT_EQ(kernels[1].kernel.rank, 1) << "a [2,1] piece";
}

TEST(LoweringViews, CompileGraphRunsAStridedInputFromItsOffset) {
  // exp of a [3,2] view, transposed with offset 1, of a [2,4] buffer.
  auto g = fused({{3, 2}}, [](ir::Graph& g, auto in) { return un(g, Op::neg, in[0]); });
  const std::vector<ir::Strides> strides = {{1, 4}};
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu(), strides);
  EXPECT_EQ(exe.slots.at(0).bytes, (1 + 2 * 1 + 1 * 4) * sizeof(float)) << "the extent, not the element count";
  auto buf = runtime::allocateBuffer(Device::cpu(), 8 * sizeof(float));
  const float values[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  std::memcpy(buf->hostData(), values, sizeof values);
  auto out = exe.run({buf}, {1 * sizeof(float)});
  const auto* y = static_cast<const float*>(out.at(0)->hostData());
  // element [i, j] is buffer[1 + i + 4 j]
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{-1, -5, -2, -6, -3, -7}));
}

}  // namespace
