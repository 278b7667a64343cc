// KILN_LOG=passes and KILN_LOG=fusion (runtime/log.h) from the PassManager:
// the graph before the pipeline and after each pass that changed it, the
// remarks of the fusion passes as they are made, and nothing when off.
#include <gtest/gtest.h>

#include "common/graph_builders.h"
#include "common/log_capture.h"
#include "ir/printer.h"
#include "passes/passes.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;

constexpr const char* kPipeline = "canonicalize,cse,fuse-elementwise";

/// relu(neg(neg(x))) + exp(b) over f32[8,4] and a broadcast f32[4]:
/// canonicalize removes the negations, cse finds nothing, fuse-elementwise
/// fuses relu with the add and refuses exp (a smaller domain).
std::unique_ptr<ir::Graph> graph() {
  auto g = std::make_unique<ir::Graph>("logged");
  ir::Value* x = g->addInput(f32({8, 4}), "x");
  ir::Value* b = g->addInput(f32({4}), "b");
  ir::Value* r = un(*g, Op::relu, un(*g, Op::neg, un(*g, Op::neg, x)));
  g->setOutputs({bin(*g, Op::add, r, un(*g, Op::exp, b))});
  return g;
}

/// What a run of the pipeline does, seen through its hook and its remarks
/// instead of the log: the graph before, and after each pass, whether that
/// pass changed it.
struct Twin {
  std::string before;
  std::vector<std::pair<std::string, std::string>> after;  // pass, graph text ("" when unchanged)
  std::vector<passes::Remark> remarks;
};

Twin runTwin() {
  auto g = graph();
  Twin twin;
  twin.before = ir::printGraph(*g);
  passes::PassManager pm(kPipeline);
  pm.setHook([&](std::string_view pass, const ir::Graph& graph, bool after, bool changed) {
    if (after) twin.after.emplace_back(std::string(pass), changed ? ir::printGraph(graph) : "");
  });
  pm.run(*g);
  twin.remarks = pm.remarks();
  return twin;
}

std::string logOfPipeline(const char* channels) {
  return logOf(channels, [] {
    auto g = graph();
    passes::PassManager(kPipeline).run(*g);
  });
}

TEST(PassLog, PassesPrintsTheGraphBeforeAndAfterEachChange) {
  const Twin twin = runTwin();
  ASSERT_EQ(twin.after.size(), 3u);
  ASSERT_NE(twin.after[0].second, "") << "canonicalize changes the graph";
  ASSERT_EQ(twin.after[1].second, "") << "cse finds nothing";
  ASSERT_NE(twin.after[2].second, "") << "fuse-elementwise changes the graph";
  std::string want = "kiln::passes: before the pipeline:\n" + twin.before;
  for (const passes::Remark& r : twin.remarks)  // canonicalize's rewrites, made before its graph is printed
    if (r.pass == "canonicalize") want += "kiln::passes: canonicalize: " + r.message + "\n";
  want += "kiln::passes: after canonicalize:\n" + twin.after[0].second;
  want += "kiln::passes: cse changed nothing\n";
  want += "kiln::passes: after fuse-elementwise:\n" + twin.after[2].second;
  EXPECT_EQ(logOfPipeline("passes"), want);
}

TEST(PassLog, FusionPrintsEachDecisionOfTheFusionPasses) {
  const Twin twin = runTwin();
  std::string want;
  int decisions = 0;
  for (const passes::Remark& r : twin.remarks)
    if (r.pass == "fuse-elementwise") want += "kiln::fusion: fuse-elementwise: " + r.message + "\n", ++decisions;
  ASSERT_EQ(decisions, 2) << "relu -> add fused, exp -> add refused:\n" << want;
  EXPECT_EQ(logOfPipeline("fusion"), want);
}

TEST(PassLog, NothingWhenOffOrWhenOnlyOtherChannelsAreOn) {
  EXPECT_EQ(logOfPipeline(""), "");
  EXPECT_EQ(logOfPipeline("codegen,cache,recompiles"), "");
}

}  // namespace
