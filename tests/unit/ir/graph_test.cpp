// Unit tests for Graph, Node and Value edits: building nodes with create()
// (typed by the registry, nothing added when the types are wrong), use lists
// after create, replaceInput and replaceAllUsesWith (graph outputs included),
// erase (refused for a used node or a graph output, without changing the
// graph), reorder (refused for a non-topological order, without changing the
// graph), insertion before a node, constants, fusion bodies and countKernels.
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ir/printer.h"
#include "runtime/error.h"

namespace kiln::ir {
namespace {

TensorType f32(Shape shape) { return {DType::f32, std::move(shape), Device::cpu()}; }

Node* make(Graph& g, Op op, std::initializer_list<Value*> inputs, Node* before = nullptr) {
  std::vector<Value*> in(inputs);
  return g.create(op, in, {}, before);
}

std::vector<Use> uses(const Value* v) { return v->uses(); }

// x, y: f32[4]; a = add(x, y); b = relu(a); c = mul(a, b); return c
struct Diamond {
  Graph g{"diamond"};
  Value* x = g.addInput(f32({4}), "x");
  Value* y = g.addInput(f32({4}), "y");
  Node* a = make(g, Op::add, {x, y});
  Node* b = make(g, Op::relu, {a->output()});
  Node* c = make(g, Op::mul, {a->output(), b->output()});
  Diamond() { g.setOutputs({c->output()}); }
};

TEST(Graph, InputsAndNodesKnowTheirPlace) {
  Diamond d;
  EXPECT_EQ(d.g.name(), "diamond");
  EXPECT_EQ(d.g.numInputs(), 2);
  EXPECT_EQ(d.g.input(1), d.y);
  EXPECT_EQ(d.x->node(), nullptr) << "a graph input has no defining node";
  EXPECT_EQ(d.y->index(), 1);
  EXPECT_EQ(d.x->name(), "x");
  EXPECT_EQ(d.x->graph(), &d.g);
  EXPECT_EQ(d.a->output()->node(), d.a);
  EXPECT_EQ(d.a->output()->index(), 0);
  EXPECT_EQ(d.a->owner(), &d.g);
  EXPECT_EQ(d.a->op(), Op::add);
  EXPECT_EQ(d.a->info().name, "add");
  EXPECT_EQ(d.a->numInputs(), 2);
  EXPECT_EQ(d.a->input(1), d.y);
  EXPECT_EQ(d.c->output()->type(), f32({4}));
  EXPECT_EQ(d.g.nodes(), (std::vector<Node*>{d.a, d.b, d.c}));
  EXPECT_EQ(d.g.numNodes(), 3);
  EXPECT_TRUE(d.g.isOutput(d.c->output()));
  EXPECT_FALSE(d.g.isOutput(d.a->output()));
}

TEST(Graph, CreateRecordsUses) {
  Diamond d;
  EXPECT_EQ(uses(d.x), (std::vector<Use>{{d.a, 0}}));
  EXPECT_EQ(uses(d.y), (std::vector<Use>{{d.a, 1}}));
  EXPECT_EQ(uses(d.a->output()), (std::vector<Use>{{d.b, 0}, {d.c, 0}}));
  EXPECT_EQ(uses(d.b->output()), (std::vector<Use>{{d.c, 1}}));
  EXPECT_FALSE(d.c->output()->hasUses()) << "a graph output is not a use";
}

TEST(Graph, CreateInfersBroadcastTypes) {
  Graph g;
  Value* m = g.addInput(f32({2, 3}));
  Value* v = g.addInput(f32({3}));
  Node* n = make(g, Op::add, {m, v});
  EXPECT_EQ(n->output()->type(), f32({2, 3}));
  EXPECT_EQ(n->numOutputs(), 1);
}

TEST(Graph, CreateWithBadTypesThrowsAndAddsNothing) {
  Graph g;
  Value* m = g.addInput(f32({2, 3}));
  Value* v = g.addInput(f32({4}));
  try {
    make(g, Op::add, {m, v});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "add: shapes do not broadcast, got f32[2,3]@cpu and f32[4]@cpu");
  }
  EXPECT_EQ(g.numNodes(), 0);
  EXPECT_FALSE(m->hasUses());
  EXPECT_FALSE(v->hasUses());
  EXPECT_THROW(make(g, Op::relu, {m, v}), Error) << "arity";
  EXPECT_EQ(g.numNodes(), 0);
}

TEST(Graph, ReplaceInputMovesTheUse) {
  // Given:   c = mul(a, b)
  // Execute: c->replaceInput(1, x)
  // Result:  c = mul(a, x)
  Diamond d;
  d.c->replaceInput(1, d.x);
  EXPECT_EQ(d.c->input(1), d.x);
  EXPECT_FALSE(d.b->output()->hasUses());
  EXPECT_EQ(uses(d.x), (std::vector<Use>{{d.a, 0}, {d.c, 1}}));
  EXPECT_EQ(uses(d.a->output()), (std::vector<Use>{{d.b, 0}, {d.c, 0}}));
}

TEST(Graph, ReplaceInputWithTheSameValueKeepsOneUse) {
  Diamond d;
  d.b->replaceInput(0, d.a->output());
  const std::vector<Use> aUses = uses(d.a->output());
  EXPECT_EQ(std::count(aUses.begin(), aUses.end(), Use{d.b, 0}), 1);
  EXPECT_EQ(aUses.size(), 2u);
}

TEST(Graph, ReplaceInputOutOfRangeIsABug) {
  Diamond d;
  EXPECT_THROW(d.b->replaceInput(1, d.x), InternalError);
  EXPECT_THROW(d.b->replaceInput(-1, d.x), InternalError);
  EXPECT_EQ(uses(d.x).size(), 1u);
}

TEST(Graph, ReplaceAllUsesWithMovesEveryUseAndGraphOutputs) {
  Diamond d;
  Value* av = d.a->output();
  d.g.setOutputs({av, d.c->output(), av});
  d.g.replaceAllUsesWith(av, d.y);
  EXPECT_FALSE(av->hasUses());
  EXPECT_EQ(d.b->input(0), d.y);
  EXPECT_EQ(d.c->input(0), d.y);
  // y keeps its old use and gains the two moved ones.
  std::vector<Use> yUses = uses(d.y);
  ASSERT_EQ(yUses.size(), 3u);
  EXPECT_NE(std::find(yUses.begin(), yUses.end(), Use{d.a, 1}), yUses.end());
  EXPECT_NE(std::find(yUses.begin(), yUses.end(), Use{d.b, 0}), yUses.end());
  EXPECT_NE(std::find(yUses.begin(), yUses.end(), Use{d.c, 0}), yUses.end());
  // Graph outputs follow, every occurrence.
  EXPECT_EQ(std::vector<Value*>(d.g.outputs().begin(), d.g.outputs().end()),
            (std::vector<Value*>{d.y, d.c->output(), d.y}));
  EXPECT_FALSE(d.g.isOutput(av));
}

TEST(Graph, ReplaceAllUsesWithItselfChangesNothing) {
  Diamond d;
  d.g.replaceAllUsesWith(d.a->output(), d.a->output());
  EXPECT_EQ(uses(d.a->output()), (std::vector<Use>{{d.b, 0}, {d.c, 0}}));
}

TEST(Graph, EraseAfterReplaceAllUsesWith) {
  // Given:   %2 = relu(%1); %3 = exp(%2)
  // Execute: replaceAllUsesWith(v2, v1); erase(node2)
  // Result:  %3 = exp(%1)
  Graph g;
  Value* v0 = g.addInput(f32({8}), "x");
  Node* n1 = make(g, Op::neg, {v0});
  Node* n2 = make(g, Op::relu, {n1->output()});
  Node* n3 = make(g, Op::exp, {n2->output()});
  g.setOutputs({n3->output()});
  g.replaceAllUsesWith(n2->output(), n1->output());
  g.erase(n2);
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{n1, n3}));
  EXPECT_EQ(n3->input(0), n1->output());
  EXPECT_EQ(uses(n1->output()), (std::vector<Use>{{n3, 0}})) << "the erased relu's use is gone";
}

TEST(Graph, EraseRemovesTheNodesUses) {
  Diamond d;
  Node* extra = make(d.g, Op::sub, {d.x, d.x});
  EXPECT_EQ(uses(d.x).size(), 3u);
  d.g.erase(extra);
  EXPECT_EQ(uses(d.x), (std::vector<Use>{{d.a, 0}}));
  EXPECT_EQ(d.g.numNodes(), 3);
}

TEST(Graph, EraseOfAUsedNodeOrAGraphOutputIsRefusedAndChangesNothing) {
  Diamond d;
  const std::string before = printGraph(d.g);
  EXPECT_THROW(d.g.erase(d.a), InternalError) << "a is used by b and c";
  EXPECT_THROW(d.g.erase(d.c), InternalError) << "c is the graph's output";
  EXPECT_EQ(d.g.numNodes(), 3);
  EXPECT_EQ(uses(d.a->output()), (std::vector<Use>{{d.b, 0}, {d.c, 0}}));
  EXPECT_EQ(uses(d.x), (std::vector<Use>{{d.a, 0}}));
  EXPECT_EQ(printGraph(d.g), before);
}

TEST(Graph, EraseOfANodeOfAnotherGraphIsABug) {
  Diamond d, other;
  EXPECT_THROW(d.g.erase(other.b), InternalError);
  EXPECT_EQ(other.g.numNodes(), 3);
}

TEST(Graph, CreateBeforeANode) {
  Diamond d;
  Node* n = make(d.g, Op::neg, {d.x}, d.b);
  EXPECT_EQ(d.g.nodes(), (std::vector<Node*>{d.a, n, d.b, d.c}));
  Node* first = d.g.createConstant(2.0, f32({}), d.a);
  EXPECT_EQ(d.g.nodes().front(), first);
}

TEST(Graph, ReorderAcceptsAnyTopologicalOrder) {
  Graph g;
  Value* x = g.addInput(f32({4}), "x");
  Node* p = make(g, Op::exp, {x});
  Node* q = make(g, Op::log, {x});
  Node* r = make(g, Op::add, {p->output(), q->output()});
  g.setOutputs({r->output()});
  g.reorder({q, p, r});
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{q, p, r}));
  // Later edits still work on the moved nodes (their list positions are valid).
  Node* s = make(g, Op::neg, {x}, p);
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{q, s, p, r}));
  g.erase(s);
  EXPECT_EQ(g.nodes(), (std::vector<Node*>{q, p, r}));
}

TEST(Graph, ReorderRejectsANonTopologicalOrderAndKeepsTheGraph) {
  Diamond d;
  const std::string before = printGraph(d.g);
  EXPECT_THROW(d.g.reorder({d.b, d.a, d.c}), InternalError) << "b before its input a";
  // The refused reorder left every node in place, in its old order.
  ASSERT_EQ(d.g.numNodes(), 3);
  EXPECT_EQ(d.g.nodes(), (std::vector<Node*>{d.a, d.b, d.c}));
  EXPECT_EQ(printGraph(d.g), before);
  EXPECT_THROW(d.g.reorder({d.a, d.c, d.b}), InternalError) << "c before its input b";
  EXPECT_EQ(d.g.nodes(), (std::vector<Node*>{d.a, d.b, d.c}));
  // And the graph is still editable.
  d.g.reorder({d.a, d.b, d.c});
  EXPECT_EQ(printGraph(d.g), before);
}

TEST(Graph, ReorderRejectsMissingRepeatedOrForeignNodes) {
  Diamond d, other;
  EXPECT_THROW(d.g.reorder({d.a, d.b}), InternalError);
  EXPECT_THROW(d.g.reorder({d.a, d.a, d.b}), InternalError);
  EXPECT_THROW(d.g.reorder({d.a, d.b, other.c}), InternalError);
  EXPECT_EQ(d.g.nodes(), (std::vector<Node*>{d.a, d.b, d.c}));
  EXPECT_EQ(other.g.nodes(), (std::vector<Node*>{other.a, other.b, other.c}));
}

TEST(Graph, CreateConstant) {
  Graph g;
  Node* k = g.createConstant(0.5, f32({}));
  EXPECT_EQ(k->op(), Op::constant);
  EXPECT_EQ(k->numInputs(), 0);
  EXPECT_EQ(k->output()->type(), f32({}));
  ASSERT_EQ(k->attrs().count("value"), 1u);
  EXPECT_EQ(std::get<double>(k->attrs().at("value")), 0.5);
}

// A fusion node whose body computes relu(add(p0, p1)).
Node* addFusion(Graph& g, Value* a, Value* b) {
  std::vector<Value*> in{a, b};
  Node* f = g.appendRaw(Op::fusion, in, {a->type()});
  auto body = std::make_unique<Graph>("body");
  Value* p0 = body->addInput(a->type());
  Value* p1 = body->addInput(b->type());
  Node* s = make(*body, Op::add, {p0, p1});
  Node* r = make(*body, Op::relu, {s->output()});
  body->setOutputs({r->output()});
  f->setBody(std::move(body));
  return f;
}

TEST(Graph, FusionNodeOwnsItsBody) {
  Graph g;
  Value* x = g.addInput(f32({4}));
  Node* f = addFusion(g, x, x);
  ASSERT_NE(f->body(), nullptr);
  EXPECT_EQ(f->body()->numNodes(), 2);
  EXPECT_EQ(f->body()->numInputs(), 2);
  EXPECT_EQ(f->output()->type(), f32({4}));
  EXPECT_EQ(uses(x), (std::vector<Use>{{f, 0}, {f, 1}}));
  Graph plain;
  EXPECT_EQ(make(plain, Op::neg, {plain.addInput(f32({1}))})->body(), nullptr);
}

TEST(CountKernels, ConstantsAreFreeAndAFusionIsOneKernel) {
  Graph g;
  Value* x = g.addInput(f32({4}));
  EXPECT_EQ(countKernels(g), 0) << "no nodes";
  Node* k = g.createConstant(1.0, f32({}));
  EXPECT_EQ(countKernels(g), 0) << "a constant is folded into its users";
  Node* a = make(g, Op::add, {x, k->output()});
  Node* e = make(g, Op::exp, {a->output()});
  EXPECT_EQ(countKernels(g), 2);
  Node* f = addFusion(g, e->output(), x);
  EXPECT_EQ(countKernels(g), 3) << "the fusion's two body nodes are one kernel";
  EXPECT_EQ(countKernels(*f->body()), 2);
}

TEST(CountKernels, ACatIsOneCopyPerInputWithElements) {
  Graph g;
  Value* x = g.addInput(f32({2, 3}));
  Value* empty = g.addInput(f32({0, 3}));
  Value* z = g.addInput(f32({4, 3}));
  Node* c = g.create(Op::cat, std::vector<Value*>{x, empty, z}, {{"dim", int64_t{0}}});
  g.setOutputs({c->output()});
  EXPECT_EQ(countKernels(g), 2) << "x and z are copied; the empty input takes no kernel";
  // The cat inside a fusion, as fuse-elementwise leaves it.
  Graph fused;
  std::vector<Value*> in{fused.addInput(f32({2, 3})), fused.addInput(f32({0, 3})), fused.addInput(f32({4, 3}))};
  Node* f = fused.appendRaw(Op::fusion, in, {c->output()->type()});
  auto body = std::make_unique<Graph>("body");
  std::vector<Value*> params;
  for (Value* v : in) params.push_back(body->addInput(v->type()));
  body->setOutputs({body->create(Op::cat, params, {{"dim", int64_t{0}}})->output()});
  f->setBody(std::move(body));
  fused.setOutputs({f->output()});
  EXPECT_EQ(countKernels(fused), 2);
  EXPECT_EQ(countKernels(*f->body()), 2);
}

TEST(CountKernels, AViewReadOnlyByLibraryCallsIsNoKernel) {
  Graph g;
  Value* x = g.addInput(f32({2, 3}));
  Value* w = g.addInput(f32({5, 3}));
  Node* t = g.create(Op::transpose, std::vector<Value*>{w}, {{"perm", std::vector<int64_t>{1, 0}}});
  Node* r = g.create(Op::reshape, std::vector<Value*>{t->output()}, {{"shape", std::vector<int64_t>{3, 5}}});
  Node* mm = g.create(Op::matmul, std::vector<Value*>{x, r->output()});
  g.setOutputs({mm->output()});
  EXPECT_TRUE(readOnlyByLibraryCalls(t->output())) << "through the reshape";
  EXPECT_EQ(countKernels(g), 1) << "the matmul; both views are aliases of w";
  g.setOutputs({mm->output(), r->output()});
  EXPECT_FALSE(readOnlyByLibraryCalls(t->output()));
  EXPECT_FALSE(readOnlyByLibraryCalls(r->output()));
  EXPECT_EQ(countKernels(g), 3) << "a returned view is copied: each view op counts until fusion merges them";
}

}  // namespace
}  // namespace kiln::ir
