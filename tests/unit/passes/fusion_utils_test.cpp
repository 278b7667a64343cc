// Unit tests for the helpers the fusion passes share (passes/fusion_utils.h):
// view chains (what a chain is, the layout strides read it with or that
// none can, the chains feeding a group), the cycle check with and without
// other groups, erasing what nobody reads, and the reordering by key.
#include "passes/fusion_utils.h"

#include <gtest/gtest.h>

#include "common/graph_builders.h"
#include "runtime/error.h"

namespace kiln::passes {
namespace {

using ir::Graph, ir::Node, ir::Op, ir::Value;
using testutil::bin, testutil::f32, testutil::un;

Node* transpose(Graph& g, Value* v) {
  return g.create(Op::transpose, std::vector<Value*>{v}, {{"perm", std::vector<int64_t>{1, 0}}});
}
Node* reshape(Graph& g, Value* v, std::vector<int64_t> shape) {
  return g.create(Op::reshape, std::vector<Value*>{v}, {{"shape", std::move(shape)}});
}
Node* slice(Graph& g, Value* v, int64_t dim, int64_t start, int64_t end) {
  return g.create(Op::slice, std::vector<Value*>{v},
                  {{"dim", dim}, {"start", start}, {"end", end}, {"step", int64_t{1}}});
}

TEST(FusionUtils, DescribeNamesOpAndType) {
  Graph g;
  Value* x = g.addInput(f32({2, 3}), "x");
  EXPECT_EQ(describe(un(g, Op::relu, x)->node()), "relu: f32[2,3]@cpu");
}

TEST(FusionUtils, ChainOfRunsFromTheRootDown) {
  Graph g;
  Value* x = g.addInput(f32({4, 6}), "x");
  Node* t = transpose(g, x);                 // [6,4]
  Node* s = slice(g, t->output(), 0, 1, 3);  // [2,4]
  Node* r = un(g, Op::relu, s->output())->node();
  EXPECT_EQ(chainOf(s->output()), (std::vector<Node*>{t, s}));
  EXPECT_TRUE(chainOf(x).empty()) << "a graph input";
  EXPECT_TRUE(chainOf(r->output()).empty()) << "an elementwise result";
  EXPECT_TRUE(isView(t) && !isView(r) && !isView(nullptr));
  EXPECT_TRUE(isConstant(testutil::constant(g, 1.0)->node()) && !isConstant(nullptr) && !isConstant(r));
  EXPECT_TRUE(isElementwise(r) && !isElementwise(t));
}

TEST(FusionUtils, ChainLayoutIsWhatStridesRead) {
  Graph g;
  Value* x = g.addInput(f32({4, 6}), "x");
  Node* t = transpose(g, x);
  Node* s = slice(g, t->output(), 0, 1, 3);
  // x is contiguous [6, 1]: its transpose walks [1, 6]; rows 1..3 of that
  // start at element 1.
  EXPECT_EQ(chainLayout(chainOf(s->output())), (ir::Layout{{1, 6}, 1}));
  // Merging the transposed dims reads x in another order than any strides can.
  Node* flat = reshape(g, t->output(), {24});
  EXPECT_EQ(chainLayout(chainOf(flat->output())), std::nullopt);
  // Merging x's own dims is a view.
  EXPECT_EQ(chainLayout(chainOf(reshape(g, x, {24})->output())), (ir::Layout{{1}, 0}));
}

TEST(FusionUtils, ChainsIntoAGroupStopAtItsMembers) {
  // a = relu(x); v = reshape(a) is a member (as fuse-reductions takes a
  // reshape of a value per row); t2 = transpose(transpose(y)) feeds add twice.
  Graph g;
  Value* x = g.addInput(f32({2, 3}), "x");
  Value* y = g.addInput(f32({3, 2}), "y");
  Node* a = un(g, Op::relu, x)->node();
  Node* v = reshape(g, a->output(), {3, 2});
  Node* t1 = transpose(g, y);
  Node* t2 = transpose(g, t1->output());
  Node* add = bin(g, Op::add, v->output(), t2->output())->node();
  Node* mul = bin(g, Op::mul, add->output(), t2->output())->node();
  const std::vector<Node*> members{a, v, add, mul};
  EXPECT_EQ(chainsInto(members), (std::vector<Node*>{t1, t2})) << "each op once, root first; the member reshape not";
}

TEST(FusionUtils, WouldCycleFindsAPathThatLeavesAndComesBack) {
  // a -> b -> c: with b outside {a, c}, a path leaves the set and comes back.
  Graph g;
  Value* x = g.addInput(f32({4}), "x");
  Node* a = un(g, Op::relu, x)->node();
  Node* b = un(g, Op::exp, a->output())->node();
  Node* c = un(g, Op::neg, b->output())->node();
  auto alone = [](const Node*) { return std::span<Node* const>(); };
  EXPECT_TRUE(wouldCycle({a, c}, alone));
  EXPECT_FALSE(wouldCycle({a, b}, alone));
  EXPECT_FALSE(wouldCycle({b, c}, alone));
  EXPECT_FALSE(wouldCycle({a, b, c}, alone));
}

TEST(FusionUtils, WouldCycleTreatsAnotherGroupAsOneNode) {
  // a -> e and d -> c, no path from a to c; but once e and d are one group
  // (one kernel), a -> {e, d} -> c is a path out of {a, c} and back.
  Graph g;
  Value* x = g.addInput(f32({4}), "x");
  Node* a = un(g, Op::relu, x)->node();
  Node* e = un(g, Op::exp, a->output())->node();
  Node* d = un(g, Op::neg, x)->node();
  Node* c = bin(g, Op::add, d->output(), x)->node();
  std::vector<Node*> group{e, d};
  auto alone = [](const Node*) { return std::span<Node* const>(); };
  auto grouped = [&](const Node* n) {
    return n == e || n == d ? std::span<Node* const>(group) : std::span<Node* const>();
  };
  EXPECT_FALSE(wouldCycle({a, c}, alone));
  EXPECT_TRUE(wouldCycle({a, c}, grouped));
}

TEST(FusionUtils, EraseUnusedGoesLastFirst) {
  Graph g;
  Value* x = g.addInput(f32({2, 3}), "x");
  Node* t1 = transpose(g, x);
  transpose(g, t1->output());            // nobody reads it, so once it goes nobody reads t1
  g.createConstant(1.0, f32({}));        // nobody reads it
  Node* t3 = transpose(g, x);            // returned: stays
  Node* r = un(g, Op::relu, x)->node();  // read by nobody, but not selected
  g.setOutputs({t3->output()});
  eraseUnused(g, [](const Node* n) { return isView(n) || isConstant(n); });
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{t3, r}));
}

TEST(FusionUtils, ReorderByKeyPutsProducersFirst) {
  Graph g;
  Value* x = g.addInput(f32({4}), "x");
  Node* p = un(g, Op::exp, x)->node();
  Node* q = un(g, Op::log, x)->node();
  Node* r = un(g, Op::neg, p->output())->node();
  g.setOutputs({q->output(), r->output()});
  // Keys put r first, but r reads p; q and p tie and keep their order.
  reorderByKey(g, {{p, 5}, {q, 5}, {r, 1}});
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{p, r, q}));
  EXPECT_EQ(positions(g), (std::unordered_map<const Node*, int>{{p, 0}, {r, 1}, {q, 2}}));
}

}  // namespace
}  // namespace kiln::passes
