// The thread pool's split of a kernel has no false sharing (issue 5, item
// 5): ThreadPool::parallelFor cuts a kernel's domain into ranges that are
// multiples of the step's grain, so every multiple of the grain is a place
// where one thread's writes may end and another's begin. There, every
// output of the kernel must start a new 64-byte cache line, or the two
// threads write one line. Checked on the steps compileGraph makes for
// elementwise kernels (rank 1, rank 2 with rows of odd length, 1- and
// 2-byte outputs, several outputs) and reduction kernels (outer results of
// 1 and 2 bytes, keepdim or not, rows written along the row, the fused
// relu -> dropout -> layer_norm and its backward), with buffers 64-byte
// aligned as the allocator gives them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/lowering_reduction.h"
#include "common/graph_builders.h"
#include "frontend/kiln.h"
#include "passes/pass_manager.h"
#include "runtime/buffer.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;

ir::TensorType type(DType d, ir::Shape s) { return {d, std::move(s), Device::cpu()}; }

/// Checks every multiple of each kernel step's grain in `graph` (traced and
/// run through kiln::compile's pipeline).
void expectLineAlignedSplits(ir::Graph& graph, const std::string& what) {
  passes::PassManager(CompileOptions{}.pipeline).run(graph);
  const runtime::Executable exe = codegen::compileGraph(graph, Device::cpu());
  std::vector<codegen::LoweredKernel> lowered;
  for (const ir::Node* n : graph.nodes()) {
    if (n->op() == ir::Op::constant || n->info().kind == ir::OpKind::library || ir::isViewOp(n->op())) continue;
    for (codegen::LoweredKernel& k : codegen::lowerKernels(*n)) lowered.push_back(std::move(k));
  }
  size_t next = 0;
  int checked = 0;
  for (const runtime::Step& s : exe.steps) {
    const auto* step = std::get_if<runtime::KernelStep>(&s);
    if (!step) continue;
    ASSERT_LT(next, lowered.size()) << what;
    const codegen::Kernel& k = lowered[next++].kernel;
    ASSERT_EQ(step->args.size(), lowered[next - 1].launch.args.size()) << what << ": " << k.name;
    // The split's unit: elements of the domain, or output rows of a reduction.
    const int rank = k.isReduction() ? k.outerRank() : k.rank;
    for (int64_t b = step->shape.grain; b < step->shape.numel; b += step->shape.grain) {
      std::vector<int64_t> index(static_cast<size_t>(rank));
      int64_t rest = b;
      for (int d = rank - 1; d >= 0; --d) {
        index[static_cast<size_t>(d)] = rest % step->args[static_cast<size_t>(d)];
        rest /= step->args[static_cast<size_t>(d)];
      }
      for (int p = 0; p < k.numParams(); ++p) {
        if (!k.params[static_cast<size_t>(p)].output) continue;
        int64_t element = 0;
        for (int d = 0; d < rank; ++d)
          element += index[static_cast<size_t>(d)] * step->args[static_cast<size_t>(k.rank + p * k.rank + d)];
        const int64_t byte = (step->offsets.empty() ? 0 : step->offsets[static_cast<size_t>(p)]) +
                             element * static_cast<int64_t>(itemSize(k.params[static_cast<size_t>(p)].dtype));
        EXPECT_EQ(byte % 64, 0) << what << ": " << k.name << " output " << p << " at split " << b << " (grain "
                                << step->shape.grain << ")";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0) << what << ": no split to check (make the tensors larger)";
}

template <class F>
void expectLineAlignedSplits(F fn, const std::vector<ir::TensorType>& inputs, const std::string& what) {
  Trace t = trace(fn, inputs, "t");
  expectLineAlignedSplits(*t.graph, what);
}

TEST(ThreadSplit, BuffersAreCacheLineAligned) {
  for (size_t bytes : {1, 3, 64, 1000, 1 << 20}) {
    auto b = runtime::allocateBuffer(Device::cpu(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->hostData()) % 64, 0u) << bytes << " bytes";
  }
}

TEST(ThreadSplit, ElementwiseSplitsStartNewCacheLinesOfEveryOutput) {
  const auto f32 = [](ir::Shape s) { return type(DType::f32, std::move(s)); };
  expectLineAlignedSplits([](const Tensor& x) { return relu(x * 2.0 + 1.0); }, {f32({300001})}, "rank 1");
  expectLineAlignedSplits([](const Tensor& x, const Tensor& b) { return relu(x + b); }, {f32({257, 1001}), f32({1001})},
                          "rows of 1001 with a broadcast bias");
  expectLineAlignedSplits([](const Tensor& x) { return (x * 3.0).to(DType::f16); }, {f32({200003})}, "f16 output");
  expectLineAlignedSplits([](const Tensor& x) { return x > 0.5; }, {f32({200003})}, "bool output");
  expectLineAlignedSplits(
      [](const Tensor& x) {
        Tensor y = exp(x);
        return std::vector<Tensor>{y, (y * 2.0).to(DType::bf16)};
      },
      {f32({100003})}, "two outputs");
}

TEST(ThreadSplit, ReductionSplitsStartNewCacheLinesOfEveryOutput) {
  const auto f32 = [](ir::Shape s) { return type(DType::f32, std::move(s)); };
  expectLineAlignedSplits([](const Tensor& x) { return amax(x, {1}) > 0.0; }, {f32({9001, 7})}, "bool per row");
  expectLineAlignedSplits([](const Tensor& x) { return sum(x, {1}, true).to(DType::f16); }, {f32({9001, 7})},
                          "f16 per row, keepdim");
  expectLineAlignedSplits([](const Tensor& x) { return softmax(x, -1); }, {f32({4001, 33})}, "softmax rows of 33");
  expectLineAlignedSplits(
      [](const Tensor& x, const Tensor& w, const Tensor& b) { return layerNorm(dropout(relu(x), 0.1), {96}, w, b); },
      {f32({3001, 96}), f32({96}), f32({96})}, "relu -> dropout -> layer_norm");
  expectLineAlignedSplits(
      [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
        Tensor xx = x.detach().setRequiresGrad(), ww = w.detach().setRequiresGrad(), bb = b.detach().setRequiresGrad();
        layerNorm(dropout(relu(xx), 0.1), {96}, ww, bb).backward(g);
        return std::vector<Tensor>{xx.grad(), ww.grad(), bb.grad()};
      },
      {f32({3001, 96}), f32({96}), f32({96}), f32({3001, 96})}, "its backward");
}

}  // namespace
