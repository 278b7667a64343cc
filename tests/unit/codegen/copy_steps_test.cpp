// compileGraph's copies: a kernel that only copies a contiguous run becomes
// a CopyStep (Note [Contiguous copies are copy steps]) — a whole copy, a
// cat's pieces along the outermost dim at their offsets — while a copy that
// reorders, broadcasts or converts stays a kernel; and a graph output can
// be written through strides the caller gives, into a buffer it binds
// (copy_ into a view).
#include <gtest/gtest.h>

#include <cstring>
#include <variant>

#include "codegen/codegen.h"
#include "common/graph_builders.h"
#include "passes/passes.h"
#include "runtime/buffer.h"
#include "tests/common/host_buffers.h"

namespace {

using ::kiln::testing::hostFloats;
using ::kiln::testing::readFloats;

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;

/// A fused graph of one `op` over inputs of the given shapes.
std::unique_ptr<ir::Graph> fusedGraph(std::vector<ir::Shape> shapes, Op op, ir::Attributes attrs) {
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> in;
  for (auto& s : shapes) in.push_back(g->addInput(f32(std::move(s))));
  g->setOutputs({g->create(op, in, std::move(attrs))->output()});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

TEST(CopySteps, ACatAlongTheOutermostDimIsOneCopyPerInputAtItsOffset) {
  auto g = fusedGraph({{2, 3}, {1, 3}}, Op::cat, {{"dim", int64_t{0}}});
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 2u);
  const auto* second = std::get_if<runtime::CopyStep>(&exe.steps[1]);
  ASSERT_NE(second, nullptr) << "a contiguous piece is a copy, not a kernel";
  EXPECT_EQ(second->bytes, 3 * sizeof(float));
  EXPECT_EQ(second->offsets, (std::vector<int64_t>{0, 6 * sizeof(float)})) << "written after the first 2 rows";
  auto out = exe.run({hostFloats({1, 2, 3, 4, 5, 6}), hostFloats({7, 8, 9})});
  EXPECT_EQ(readFloats(out[0], 9), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(CopySteps, ACatAlongAnInnerDimStaysKernels) {
  auto g = fusedGraph({{2, 3}, {2, 1}}, Op::cat, {{"dim", int64_t{1}}});
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 2u);
  for (const runtime::Step& s : exe.steps) EXPECT_TRUE(std::holds_alternative<runtime::KernelStep>(s));
  auto out = exe.run({hostFloats({1, 2, 3, 4, 5, 6}), hostFloats({7, 8})});
  EXPECT_EQ(readFloats(out[0], 8), (std::vector<float>{1, 2, 3, 7, 4, 5, 6, 8}));
}

TEST(CopySteps, ReorderingBroadcastingAndConvertingCopiesAreKernels) {
  auto transposed = fusedGraph({{3, 2}}, Op::transpose, {{"perm", std::vector<int64_t>{1, 0}}});
  auto expanded = fusedGraph({{1, 4}}, Op::expand, {{"shape", std::vector<int64_t>{3, 4}}});
  auto converted = fusedGraph({{4}}, Op::cast, {{"dtype", DType::f64}});
  for (auto* g : {transposed.get(), expanded.get(), converted.get()}) {
    runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
    ASSERT_EQ(exe.steps.size(), 1u);
    EXPECT_TRUE(std::holds_alternative<runtime::KernelStep>(exe.steps[0])) << runtime::stepName(exe.steps[0]);
  }
}

TEST(CopySteps, AContiguousInputCopiedIsACopyStep) {
  // A fusion whose body returns its input: clone() of a contiguous tensor.
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->addInput(f32({5}));
  auto body = std::make_unique<ir::Graph>("fused");
  body->setOutputs({body->addInput(f32({5}))});
  ir::Node* fusion = g->appendRaw(Op::fusion, std::vector<ir::Value*>{x}, {f32({5})});
  fusion->setBody(std::move(body));
  g->setOutputs({fusion->output()});
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<runtime::CopyStep>(exe.steps[0]));
  auto in = hostFloats({1, 2, 3, 4, 5});
  auto out = exe.run({in});
  EXPECT_NE(out[0], in) << "a copy, into a buffer of its own";
  EXPECT_EQ(readFloats(out[0], 5), (std::vector<float>{1, 2, 3, 4, 5}));
  // Read through strides, the same graph copies with a kernel.
  const std::vector<ir::Strides> strided = {{2}};
  runtime::Executable gather = codegen::compileGraph(*g, Device::cpu(), strided);
  EXPECT_TRUE(std::holds_alternative<runtime::KernelStep>(gather.steps[0]));
  auto every2nd = gather.run({hostFloats({1, 0, 2, 0, 3, 0, 4, 0, 5})});
  EXPECT_EQ(readFloats(every2nd[0], 5), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(OutputStrides, AResultIsWrittenThroughTheCallersStridesIntoItsBuffer) {
  // relu(x) written transposed into the caller's [3, 2] buffer, from element 1.
  auto g = fusedGraph({{2, 3}}, Op::relu, {});
  const std::vector<ir::Strides> out = {{1, 2}};
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu(), {}, {}, out);
  auto dst = hostFloats(std::vector<float>(7, -9));
  auto results = exe.run({hostFloats({1, -2, 3, -4, 5, -6})}, {}, {dst}, {sizeof(float)});
  EXPECT_EQ(results[0], dst);
  EXPECT_EQ(readFloats(dst, 7), (std::vector<float>{-9, 1, 0, 0, 5, 3, 0}));
}

}  // namespace
