// The PassManager: pipelines from strings, unknown passes, hooks, statistics;
// and dce.
#include <gtest/gtest.h>

#include "common/graph_builders.h"
#include "common/expect_kernels.h"
#include "passes/passes.h"
#include "runtime/error.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;

TEST(PassManager, ParsesAPipeline) {
  passes::PassManager pm(" dce , fuse-elementwise,dce");
  ASSERT_EQ(pm.passes().size(), 3u);
  EXPECT_EQ(pm.passes()[0]->name, "dce");
  EXPECT_EQ(pm.passes()[1]->name, "fuse-elementwise");
  EXPECT_TRUE(passes::PassManager("").passes().empty());
}

TEST(PassManager, UnknownPassNamesItAndListsTheKnownOnes) {
  try {
    passes::PassManager pm("dce,fuse-everything");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown pass 'fuse-everything'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dce"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fuse-elementwise"), std::string::npos) << msg;
  }
}

TEST(PassManager, EveryPassHasANameAndASummary) {
  for (const auto& p : passes::allPasses()) {
    EXPECT_FALSE(p.name.empty());
    EXPECT_FALSE(p.summary.empty()) << p.name;
    EXPECT_EQ(passes::findPass(p.name), &p);
  }
  EXPECT_EQ(passes::findPass("nope"), nullptr);
}

TEST(PassManager, HookSeesEachPassBeforeAndAfterWithChanged) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  g.create(Op::exp, std::vector<ir::Value*>{x});  // dead
  g.setOutputs({x});
  passes::PassManager pm("dce,dce");
  std::vector<std::string> events;
  pm.setHook([&](std::string_view pass, const ir::Graph&, bool after, bool changed) {
    events.push_back(std::string(pass) + (after ? (changed ? ":changed" : ":same") : ":before"));
  });
  pm.run(g);
  EXPECT_EQ(events, (std::vector<std::string>{"dce:before", "dce:changed", "dce:before", "dce:same"}));
  EXPECT_EQ(pm.statistics().at("dce").at("nodes-removed"), 1);
  ASSERT_EQ(pm.timings().size(), 2u);
  EXPECT_EQ(pm.timings()[0].pass, "dce");
  EXPECT_TRUE(pm.timings()[0].changed);
  EXPECT_FALSE(pm.timings()[1].changed);
  EXPECT_GE(pm.timings()[1].ms, 0.0);
}

TEST(Dce, RemovesDeadChainsInOneRunAndKeepsOutputs) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32({4}), "x");
  ir::Value* live = g.create(Op::relu, std::vector<ir::Value*>{x})->output();
  ir::Value* d1 = g.create(Op::exp, std::vector<ir::Value*>{x})->output();
  ir::Value* d2 = g.create(Op::log, std::vector<ir::Value*>{d1})->output();
  g.create(Op::add, std::vector<ir::Value*>{d2, live});
  g.setOutputs({live});
  passes::PassManager("dce").run(g);
  ASSERT_EQ(g.numNodes(), 1) << ir::printGraph(g);
  EXPECT_EQ(g.nodes()[0]->op(), Op::relu);
  EXPECT_EQ(x->uses().size(), 1u);
}

}  // namespace

namespace {

TEST(PassManager, VerifyEachReportsAnInvalidGraphAfterAPassAsAKilnBug) {
  using namespace kiln;
  // The registry holds only correct passes, so hand the pipeline a graph that
  // is already invalid (its output belongs to another graph): the check after
  // the first pass must catch it and name that pass.
  ir::Graph foreign("foreign");
  ir::Value* y = foreign.addInput(testutil::f32({4}), "y");
  ir::Graph g;
  g.addInput(testutil::f32({4}), "x");
  g.setOutputs({y});
  passes::PassManager quiet("dce");
  quiet.setVerifyEach(false);
  EXPECT_NO_THROW(quiet.run(g));
  passes::PassManager checked("dce");
  checked.setVerifyEach(true);
  try {
    checked.run(g);
    FAIL() << "no error";
  } catch (const InternalError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("pass dce left an invalid graph"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kiln bug"), std::string::npos) << msg;
  }
}

}  // namespace
