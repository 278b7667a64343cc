// Unit tests for Graph::outline, the edit both fusion passes make: the
// documented example printed exactly (constants copied, results that are
// returned or read outside, inputs in the order the body reads them),
// members given in any order, uses outside taken over, copies in graph
// order or where first read, explicit results and placement, a group
// nobody reads, and requests that are kiln bugs (refused, graph unchanged).
#include <gtest/gtest.h>

#include <vector>

#include "common/graph_builders.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/error.h"

namespace kiln::ir {
namespace {

using testutil::bin;
using testutil::f32;
using testutil::un;

Node* nodeOf(Value* v) { return v->node(); }

/// The ops of a fusion body, in order.
std::vector<Op> bodyOps(const Node* fusion) {
  std::vector<Op> ops;
  for (const Node* n : fusion->body()->nodes()) ops.push_back(n->op());
  return ops;
}

TEST(GraphOutline, TheDocumentedExample) {
  // The example atop ir/graph.h, printed.
  Graph g("outline");
  Value* x = g.addInput(f32({4}), "x");
  Value* y = g.addInput(f32({4}), "y");
  Value* c = testutil::constant(g, 2.0);
  Value* m = bin(g, Op::mul, x, c);
  Value* e = un(g, Op::exp, m);
  Value* a = bin(g, Op::add, e, y);
  g.setOutputs({m, a});
  Node* fusion = g.outline(std::vector<Node*>{nodeOf(m), nodeOf(e), nodeOf(a)});
  ASSERT_NE(fusion, nullptr);
  EXPECT_EQ(printGraph(g), R"(graph @outline(%x: f32[4]@cpu, %y: f32[4]@cpu) -> (f32[4]@cpu, f32[4]@cpu) {
  %0 = constant() {value = 2.0} : f32[]@cpu
  %1, %2 = fusion(%x, %y) : f32[4]@cpu, f32[4]@cpu {
  ^(%3: f32[4]@cpu, %4: f32[4]@cpu):
    %5 = constant() {value = 2.0} : f32[]@cpu
    %6 = mul(%3, %5) : f32[4]@cpu
    %7 = exp(%6) : f32[4]@cpu
    %8 = add(%7, %4) : f32[4]@cpu
    return %6, %8
  }
  return %1, %2
}
)");
  EXPECT_FALSE(c->hasUses()) << "the constant stays for other readers, read by none now";
  EXPECT_EQ(x->uses(), (std::vector<Use>{{fusion, 0}}));
  EXPECT_EQ(y->uses(), (std::vector<Use>{{fusion, 1}}));
  EXPECT_NO_THROW(verify(g));
}

TEST(GraphOutline, MembersInAnyOrderAndUsesOutsideTakenOver) {
  // x -> relu -> exp -> neg (outside); relu is also read by sub (outside).
  Graph g;
  Value* x = g.addInput(f32({8}), "x");
  Value* r = un(g, Op::relu, x);
  Value* e = un(g, Op::exp, r);
  Value* n = un(g, Op::neg, e);
  Value* s = bin(g, Op::sub, r, x);
  g.setOutputs({n, s});
  Node* neg = nodeOf(n);
  Node* sub = nodeOf(s);
  Node* fusion = g.outline(std::vector<Node*>{nodeOf(e), nodeOf(r)});  // not in graph order
  ASSERT_NE(fusion, nullptr);
  EXPECT_EQ(bodyOps(fusion), (std::vector<Op>{Op::relu, Op::exp})) << "the body follows the graph's order";
  ASSERT_EQ(fusion->numOutputs(), 2) << "relu and exp are both read outside";
  EXPECT_EQ(fusion->output(0)->type(), f32({8}));
  EXPECT_EQ(sub->input(0), fusion->output(0)) << "relu's reader reads the fusion's first result";
  EXPECT_EQ(neg->input(0), fusion->output(1)) << "exp's reader reads the second";
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{neg, sub, fusion})) << "members erased, the fusion at the end";
  EXPECT_EQ(fusion->body()->outputs()[0]->node()->op(), Op::relu);
  EXPECT_EQ(fusion->body()->outputs()[1]->node()->op(), Op::exp);
}

// t = transpose(x) is defined before relu(y); add reads both. Outlining
// {relu, add} with t copied puts t first in graph order and after relu
// where first read, which also orders the fusion's inputs.
struct TransposeFeedsAdd {
  Graph g;
  Value* x = g.addInput(f32({2, 3}), "x");
  Value* y = g.addInput(f32({3, 2}), "y");
  Node* t = g.create(Op::transpose, std::vector<Value*>{x}, {{"perm", std::vector<int64_t>{1, 0}}});
  Node* r = nodeOf(un(g, Op::relu, y));
  Node* a = nodeOf(bin(g, Op::add, r->output(), t->output()));
  TransposeFeedsAdd() { g.setOutputs({a->output()}); }

  Node* outline(bool atFirstUse) {
    OutlineOptions options;
    options.copies = {t};
    options.copiesAtFirstUse = atFirstUse;
    return g.outline(std::vector<Node*>{r, a}, options);
  }
};

TEST(GraphOutline, CopiesInGraphOrder) {
  TransposeFeedsAdd s;
  Node* fusion = s.outline(false);
  EXPECT_EQ(bodyOps(fusion), (std::vector<Op>{Op::transpose, Op::relu, Op::add}));
  EXPECT_EQ(std::vector<Value*>(fusion->inputs().begin(), fusion->inputs().end()), (std::vector<Value*>{s.x, s.y}));
  EXPECT_EQ(s.g.nodes(), (std::vector<Node*>{s.t, fusion})) << "the copied transpose stays";
  EXPECT_FALSE(s.t->output()->hasUses());
  EXPECT_NO_THROW(verify(s.g));
}

TEST(GraphOutline, CopiesWhereFirstRead) {
  TransposeFeedsAdd s;
  Node* fusion = s.outline(true);
  EXPECT_EQ(bodyOps(fusion), (std::vector<Op>{Op::relu, Op::transpose, Op::add}));
  EXPECT_EQ(std::vector<Value*>(fusion->inputs().begin(), fusion->inputs().end()), (std::vector<Value*>{s.y, s.x}));
  EXPECT_NO_THROW(verify(s.g));
}

TEST(GraphOutline, ExplicitResultsBeforeANode) {
  // A copy kernel of a view: no members, the chain copied, the fusion
  // placed before the view's reader and taking over its uses.
  TransposeFeedsAdd s;
  OutlineOptions options;
  options.copies = {s.t};
  options.results = {s.t->output()};
  options.before = s.r;
  Node* fusion = s.g.outline({}, options);
  ASSERT_NE(fusion, nullptr);
  EXPECT_EQ(s.g.nodes(), (std::vector<Node*>{s.t, fusion, s.r, s.a}));
  EXPECT_EQ(bodyOps(fusion), (std::vector<Op>{Op::transpose}));
  EXPECT_EQ(s.a->input(1), fusion->output());
  EXPECT_EQ(fusion->input(0), s.x);
  EXPECT_FALSE(s.t->output()->hasUses());
}

TEST(GraphOutline, AGroupNobodyReadsIsErased) {
  Graph g;
  Value* x = g.addInput(f32({4}), "x");
  Node* kept = nodeOf(un(g, Op::neg, x));
  g.setOutputs({kept->output()});
  std::vector<Node*> unread{nodeOf(un(g, Op::relu, x))};
  unread.push_back(nodeOf(un(g, Op::exp, unread[0]->output())));
  EXPECT_EQ(g.outline(unread), nullptr) << "a fusion needs a result";
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{kept}));
  EXPECT_EQ(x->uses(), (std::vector<Use>{{kept, 0}}));
}

TEST(GraphOutline, BadRequestsAreBugsAndChangeNothing) {
  TransposeFeedsAdd s;
  const std::string before = printGraph(s.g);
  OutlineOptions both;
  both.copies = {s.r};
  EXPECT_THROW(s.g.outline(std::vector<Node*>{s.r, s.a}, both), InternalError) << "a member copied too";
  EXPECT_EQ(printGraph(s.g), before);
  // A copy that reads a member's value: the kernel would compute it at
  // other indices.
  Graph g;
  Value* x = g.addInput(f32({2, 3}), "x");
  Node* r = nodeOf(un(g, Op::relu, x));
  Node* t = g.create(Op::transpose, std::vector<Value*>{r->output()}, {{"perm", std::vector<int64_t>{1, 0}}});
  Node* e = nodeOf(un(g, Op::exp, r->output()));
  g.setOutputs({t->output(), e->output()});
  const std::string unchanged = printGraph(g);
  OutlineOptions copyT;
  copyT.copies = {t};
  EXPECT_THROW(g.outline(std::vector<Node*>{r, e}, copyT), InternalError);
  EXPECT_EQ(printGraph(g), unchanged);
}

}  // namespace
}  // namespace kiln::ir
