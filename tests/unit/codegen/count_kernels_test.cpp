// ir::countKernels against what compileGraph makes: a cat is one copy
// kernel per input with elements, a view read only by library calls is an
// alias (no kernel), a returned view is a copy, library calls and
// reductions are one step each — so EXPECT_KERNELS pins what runs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/compile_graph.h"
#include "common/expect_kernels.h"
#include "common/graph_builders.h"
#include "passes/passes.h"

namespace kiln {
namespace {

using namespace testutil;
using ir::Op;

/// relu(cat(x, empty, z, y)) @ transpose(w) and its row sums; `returnView`
/// also returns the transpose.
std::unique_ptr<ir::Graph> graph(bool returnView) {
  auto g = std::make_unique<ir::Graph>("counted");
  ir::Value* x = g->addInput(f32({2, 3}), "x");
  ir::Value* empty = g->addInput(f32({0, 3}), "e");
  ir::Value* z = g->addInput(f32({4, 3}), "z");
  ir::Value* y = g->addInput(f32({1, 3}), "y");
  ir::Value* w = g->addInput(f32({5, 3}), "w");
  ir::Value* c = g->create(Op::cat, std::vector<ir::Value*>{x, empty, z, y}, {{"dim", int64_t{0}}})->output();
  ir::Value* t = un(*g, Op::transpose, w, {{"perm", std::vector<int64_t>{1, 0}}});
  ir::Value* mm = bin(*g, Op::matmul, un(*g, Op::relu, c), t);
  ir::Value* s = g->create(Op::sum, std::vector<ir::Value*>{mm}, {{"dims", std::vector<int64_t>{1}}})->output();
  if (returnView)
    g->setOutputs({mm, s, t});
  else
    g->setOutputs({mm, s});
  return g;
}

TEST(CountKernels, MatchesTheStepsOfTheCompiledProgram) {
  for (const char* pipeline : {"fuse-elementwise", "fuse-reductions,fuse-elementwise"}) {
    for (bool returnView : {false, true}) {
      SCOPED_TRACE(fmt::format("{}, {}", pipeline, returnView ? "the view returned" : "the view read by matmul"));
      auto g = graph(returnView);
      passes::PassManager(pipeline).run(*g);
      // x's, z's and y's copies into the cat, relu, the matmul, the sum;
      // and the copy of the returned transpose. (Counting nodes gave 5 both
      // ways: the cat's fusion as one, the aliasing transpose as one.)
      EXPECT_KERNELS(*g, returnView ? 7 : 6);
      EXPECT_EQ(ir::countKernels(*g), codegen::compileGraph(*g, Device::cpu()).numKernels()) << ir::printGraph(*g);
    }
  }
}

TEST(CountKernels, AStackOfViewsIsOneCopyPerInput) {
  // stack: each input unsqueezed (a reshape), then a cat; the reshapes are
  // read through inside the cat's fusion.
  auto g = std::make_unique<ir::Graph>("stacked");
  std::vector<ir::Value*> rows;
  for (int i = 0; i < 3; ++i)
    rows.push_back(un(*g, Op::reshape, g->addInput(f32({4})), {{"shape", std::vector<int64_t>{1, 4}}}));
  g->setOutputs({g->create(Op::cat, rows, {{"dim", int64_t{0}}})->output()});
  passes::PassManager("fuse-elementwise").run(*g);
  EXPECT_KERNELS(*g, 3);
  EXPECT_EQ(codegen::compileGraph(*g, Device::cpu()).numKernels(), 3);
}

}  // namespace
}  // namespace kiln
