// Unit tests for the IR verifier (ir/verifier.h): well-formed graphs pass
// (built, parsed, and fused by the passes); each check fails with its whole
// message: on parsed text with file:line:col and the printed line, on built
// graphs without a location. Covers operand and result counts, types against
// the registry (shapes, dtypes, devices, attributes), constants, every fusion
// rule, dominance, values from other graphs or outside a body, graph outputs
// and use lists.
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "common/error_of.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"

namespace kiln::ir {
namespace {

TensorType f32(Shape shape, Device device = Device::cpu()) { return {DType::f32, std::move(shape), device}; }

constexpr const char* kHead =
    "graph @g(%x: f32[4]@cpu, %y: f32[4]@cpu, %m: f32[2,3]@cpu, %c: f32[4]@cuda:0, %i: i64[4]@cpu) -> (f32[4]@cpu) {\n";

/// The verifier's message for the graph `kHead + body`, parsed as t.kir.
std::string verifyText(const std::string& body) {
  ParseResult r = parseSource(std::string(kHead) + body, "t.kir");
  return errorOf([&] {
    for (const auto& g : r.graphs) verify(*g, &r.locations);
  });
}

struct Case {
  const char* body;
  const char* message;
};

TEST(Verifier, WellFormedGraphsPass) {
  EXPECT_EQ(verifyText("  %0 = add(%x, %y) : f32[4]@cpu\n"
                       "  %1 = add(%m, %m) : f32[2,3]@cpu\n"
                       "  %2 = constant() {value = 0.5} : f32[]@cpu\n"
                       "  %3 = mul(%0, %2) : f32[4]@cpu\n"
                       "  %4 = reshape(%1) {shape = [3, 2]} : f32[3,2]@cpu\n"
                       "  %5 = transpose(%1) {perm = [1, 0]} : f32[3,2]@cpu\n"
                       "  %6, %7 = fusion(%3, %y) : f32[4]@cpu, f32[4]@cpu {\n"
                       "  ^(%8: f32[4]@cpu, %9: f32[4]@cpu):\n"
                       "    %10 = constant() {value = 2.0} : f32[]@cpu\n"
                       "    %11 = maximum(%8, %10) : f32[4]@cpu\n"
                       "    %12 = sub(%11, %9) : f32[4]@cpu\n"
                       "    return %12, %11\n"
                       "  }\n"
                       "  %13 = neg(%c) : f32[4]@cuda:0\n"
                       "  return %7\n"
                       "}\n"),
            "no error");
}

TEST(Verifier, FusedGraphsFromThePassesPass) {
  Graph g("fused");
  Value* x = g.addInput(f32({64, 128}), "x0");
  Value* b = g.addInput(f32({128}), "x1");
  Value* k = g.createConstant(1.5, f32({}))->output();
  std::vector<Value*> in1{x, k};
  Value* m = g.create(Op::mul, in1)->output();
  std::vector<Value*> in2{b};
  Value* s = g.create(Op::sigmoid, in2)->output();
  std::vector<Value*> in3{m, s};
  Value* a = g.create(Op::add, in3)->output();
  g.setOutputs({a, m});
  EXPECT_NO_THROW(verify(g));
  passes::PassManager("dce,fuse-elementwise").run(g);
  ASSERT_EQ(g.nodes().back()->op(), Op::fusion);
  EXPECT_NO_THROW(verify(g));
}

TEST(Verifier, CountsAndTypesAgainstTheRegistry) {
  const Case cases[] = {
      {"  %0 = add(%x) : f32[4]@cpu\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: add: expected 2 inputs, got 1\n  %0 = add(%x) : f32[4]@cpu"},
      {"  %0 = relu(%x, %y) : f32[4]@cpu\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: relu: expected 1 input, got 2\n  %0 = relu(%x, %y) : f32[4]@cpu"},
      {"  %0, %1 = relu(%x) : f32[4]@cpu, f32[4]@cpu\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: relu: expected 1 result, got 2\n  %0, %1 = relu(%x) : f32[4]@cpu, f32[4]@cpu"},
      {"  %0 = exp(%x) : f32[4]@cpu\n  %1 = relu(%0) : f32[8]@cpu\n  return %x\n}\n",
       "t.kir:3:3: graph @g, node 1: relu: result type is f32[8]@cpu, but the registry infers f32[4]@cpu from "
       "f32[4]@cpu\n  %1 = relu(%0) : f32[8]@cpu"},
      {"  %0 = add(%x, %y) : f32[4]@cuda:0\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: add: result type is f32[4]@cuda:0, but the registry infers f32[4]@cpu from "
       "f32[4]@cpu and f32[4]@cpu\n  %0 = add(%x, %y) : f32[4]@cuda:0"},
      {"  %0 = add(%m, %x) : f32[2,3]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: add: shapes do not broadcast, got f32[2,3]@cpu and f32[4]@cpu\n"
       "  %0 = add(%m, %x) : f32[2,3]@cpu"},
      {"  %0 = add(%x, %c) : f32[4]@cpu\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: add: expected all tensors on the same device, got f32[4]@cpu and "
       "f32[4]@cuda:0\n  %0 = add(%x, %c) : f32[4]@cpu"},
      {"  %0 = add(%x, %i) : f32[4]@cpu\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: add: expected all tensors of the same dtype, got f32[4]@cpu and i64[4]@cpu\n"
       "  %0 = add(%x, %i) : f32[4]@cpu"},
      {"  %0 = transpose(%m) {perm = [1]} : f32[3,2]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: transpose: perm [1] is not a permutation of the 2 dimensions of f32[2,3]@cpu\n"
       "  %0 = transpose(%m) {perm = [1]} : f32[3,2]@cpu"},
      {"  %0 = reshape(%m) : f32[6]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: reshape: missing attribute 'shape'\n  %0 = reshape(%m) : f32[6]@cpu"},
      {"  %0 = reshape(%m) {shape = 6} : f32[6]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: reshape: attribute 'shape' must be an int list, got 6\n"
       "  %0 = reshape(%m) {shape = 6} : f32[6]@cpu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    EXPECT_EQ(verifyText(c.body), c.message);
  }
}

TEST(Verifier, Constants) {
  const Case cases[] = {
      {"  %0 = constant() : f32[]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: constant: missing attribute 'value'\n  %0 = constant() : f32[]@cpu"},
      {"  %0 = constant() {value = \"1\"} : f32[]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: constant: attribute 'value' must be an int or a float, got \"1\"\n"
       "  %0 = constant() {value = \"1\"} : f32[]@cpu"},
      // An int value is exact (Note [Integer constants are exact]); one the
      // dtype cannot hold is an error rather than wrapped.
      {"  %0 = constant() {value = 2147483648} : i32[]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: constant: value 2147483648 does not fit i32\n"
       "  %0 = constant() {value = 2147483648} : i32[]@cpu"},
      {"  %0 = constant() {value = 2} : bool[]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: constant: value 2 does not fit bool\n"
       "  %0 = constant() {value = 2} : bool[]@cpu"},
      {"  %0 = constant(%x) {value = 1.0} : f32[]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: constant: expected 0 inputs, got 1\n"
       "  %0 = constant(%x) {value = 1.0} : f32[]@cpu"},
      {"  %0, %1 = constant() {value = 1.0} : f32[]@cpu, f32[]@cpu\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: constant: expected 1 result, got 2\n"
       "  %0, %1 = constant() {value = 1.0} : f32[]@cpu, f32[]@cpu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    EXPECT_EQ(verifyText(c.body), c.message);
  }
}

TEST(Verifier, FusionNodes) {
  const Case cases[] = {
      {"  %0 = fusion(%x) : f32[4]@cpu\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: has no body\n  %0 = fusion(%x) : f32[4]@cpu"},
      {"  %0 = fusion(%x, %y) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu):\n    return %1\n  }\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: body has 1 block argument for 2 operands\n"
       "  %0 = fusion(%x, %y) : f32[4]@cpu {"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[8]@cpu):\n    return %1\n  }\n  return %x\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: block argument 0 has type f32[8]@cpu, but operand 0 has type "
       "f32[4]@cpu\n  %0 = fusion(%x) : f32[4]@cpu {"},
      {"  %0, %1 = fusion(%x) : f32[4]@cpu, f32[4]@cpu {\n  ^(%2: f32[4]@cpu):\n    return %2\n  }\n"
       "  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: body returns 1 value for 2 results\n"
       "  %0, %1 = fusion(%x) : f32[4]@cpu, f32[4]@cpu {"},
      {"  %0 = fusion(%m) : f32[4]@cpu {\n  ^(%1: f32[2,3]@cpu):\n    %2 = relu(%1) : f32[2,3]@cpu\n"
       "    return %2\n  }\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: body result 0 has type f32[2,3]@cpu, but result 0 has type f32[4]@cpu\n"
       "  %0 = fusion(%m) : f32[4]@cpu {"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu):\n    %2 = fusion(%1) : f32[4]@cpu {\n"
       "    ^(%3: f32[4]@cpu):\n      return %3\n    }\n    return %2\n  }\n  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: body node 0 is fusion; a fusion body holds only elementwise ops, "
       "movement ops, reductions and constants\n  %0 = fusion(%x) : f32[4]@cpu {"},
      {"  %0 = fusion(%x, %c) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu, %2: f32[4]@cuda:0):\n    return %1\n  }\n"
       "  return %0\n}\n",
       "t.kir:2:3: graph @g, node 0: fusion: expected all tensors on the same device, got f32[4]@cpu and "
       "f32[4]@cuda:0\n  %0 = fusion(%x, %c) : f32[4]@cpu {"},
      // An error inside a body names the body and points into it.
      {"  %0 = relu(%x) : f32[4]@cpu\n  %1 = fusion(%x, %y) : f32[4]@cpu {\n  ^(%2: f32[4]@cpu, %3: f32[4]@cpu):\n"
       "    %4 = exp(%2) : f32[4]@cpu\n    %5 = add(%4) : f32[4]@cpu\n    return %5\n  }\n  return %1\n}\n",
       "t.kir:6:5: graph @g, body of node 1, node 1: add: expected 2 inputs, got 1\n  %5 = add(%4) : f32[4]@cpu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    EXPECT_EQ(verifyText(c.body), c.message);
  }
}

// The checks below cannot fail on parsed text (the parser resolves names in
// order and per body); they guard graphs built or edited in code.

TEST(Verifier, OperandsDefinedBeforeUseInTheSameGraph) {
  Graph g("g");
  Value* x = g.addInput(f32({4}), "x");
  std::vector<Value*> in{x};
  Node* relu = g.create(Op::relu, in);
  std::vector<Value*> late{relu->output()};
  Node* exp = g.appendRaw(Op::exp, late, {f32({4})}, {}, /*before=*/relu);
  g.setOutputs({exp->output()});
  EXPECT_EQ(errorOf([&] { verify(g); }),
            "graph @g, node 0: exp: operand 0 is used before its definition\n  %0 = exp(%1) : f32[4]@cpu");

  Graph other("other");
  Value* foreign = other.addInput(f32({4}), "z");
  Graph h("h");
  std::vector<Value*> fin{foreign};
  h.setOutputs({h.appendRaw(Op::neg, fin, {f32({4})})->output()});
  EXPECT_EQ(errorOf([&] { verify(h); }),
            "graph @h, node 0: neg: operand 0 is defined in another graph\n  %0 = neg(%z) : f32[4]@cpu");
}

TEST(Verifier, FusionBodiesSeeOnlyTheirOwnValues) {
  Graph g("g");
  Value* x = g.addInput(f32({4}), "x");
  Value* y = g.addInput(f32({4}), "y");
  std::vector<Value*> in{x};
  Node* f = g.appendRaw(Op::fusion, in, {f32({4})});
  auto body = std::make_unique<Graph>("fused");
  Value* a = body->addInput(f32({4}), "a");
  std::vector<Value*> bin{a, y};  // y is the outer graph's
  body->setOutputs({body->appendRaw(Op::add, bin, {f32({4})})->output()});
  f->setBody(std::move(body));
  g.setOutputs({f->output()});
  EXPECT_EQ(errorOf([&] { verify(g); }),
            "graph @g, body of node 0, node 0: add: operand 1 is defined outside this fusion body; a body sees only "
            "its block arguments and its own values\n  %1 = add(%a, %y) : f32[4]@cpu");

  f->body()->nodes()[0]->replaceInput(1, f->body()->input(0));
  EXPECT_EQ(errorOf([&] { verify(g); }), "no error");
  f->body()->setOutputs({x});
  EXPECT_EQ(errorOf([&] { verify(g); }), "graph @g, body of node 0: return value 0 is not defined in this fusion body");
}

TEST(Verifier, OnlyFusionNodesHaveBodiesAndFusionsHaveResults) {
  Graph g("g");
  Value* x = g.addInput(f32({4}), "x");
  std::vector<Value*> in{x};
  Node* relu = g.create(Op::relu, in);
  relu->setBody(std::make_unique<Graph>("fused"));
  g.setOutputs({x});
  EXPECT_EQ(errorOf([&] { verify(g); }),
            "graph @g, node 0: relu: only fusion nodes have a body\n  %0 = relu(%x) : f32[4]@cpu {");

  Graph h("h");
  Value* z = h.addInput(f32({4}), "z");
  std::vector<Value*> zin{z};
  Node* f = h.appendRaw(Op::fusion, zin, {});
  auto body = std::make_unique<Graph>("fused");
  body->addInput(f32({4}));
  f->setBody(std::move(body));
  EXPECT_EQ(errorOf([&] { verify(h); }).substr(0, 61),
            "graph @h, node 0: fusion: expected at least 1 result, got 0\n ");
}

TEST(Verifier, GraphOutputs) {
  Graph g("g");
  Value* x = g.addInput(f32({4}), "x");
  g.setOutputs({x, nullptr});
  EXPECT_EQ(errorOf([&] { verify(g); }), "graph @g: return value 1 is null");
  Graph other("other");
  g.setOutputs({other.addInput(f32({4}))});
  EXPECT_EQ(errorOf([&] { verify(g); }), "graph @g: return value 0 is not defined in this graph");
  g.setOutputs({x});
  EXPECT_EQ(errorOf([&] { verify(g); }), "no error");
}

// Use lists are kept by Graph's methods; these tests break them by hand the
// way a buggy edit could.
std::vector<Use>& usesOf(Value* v) { return const_cast<std::vector<Use>&>(v->uses()); }

TEST(Verifier, UseListsMatchInputSlots) {
  auto make = [](Graph& g) {
    Value* x = g.addInput(f32({4}), "x");
    std::vector<Value*> in{x};
    Node* relu = g.create(Op::relu, in);
    std::vector<Value*> in2{relu->output()};
    Node* neg = g.create(Op::neg, in2);
    g.setOutputs({neg->output()});
    return std::pair{relu, neg};
  };
  {
    Graph g("g");
    make(g);
    usesOf(g.input(0)).clear();
    EXPECT_EQ(errorOf([&] { verify(g); }),
              "graph @g, node 0: relu: operand 0 is missing from its value's use list\n  %0 = relu(%x) : f32[4]@cpu");
  }
  {
    Graph g("g");
    auto [relu, neg] = make(g);
    usesOf(g.input(0)).push_back({neg, 0});
    EXPECT_EQ(errorOf([&] { verify(g); }),
              "graph @g: input 0 lists a use by input 0 of node 1 (neg), which does not read it");
  }
  {
    Graph g("g");
    auto [relu, neg] = make(g);
    usesOf(g.input(0)).push_back({relu, 3});
    EXPECT_EQ(errorOf([&] { verify(g); }),
              "graph @g: input 0 lists a use by input 3 of node 0 (relu), which does not read it");
  }
  {
    Graph g("g");
    auto [relu, neg] = make(g);
    usesOf(relu->output()).push_back({neg, 0});
    EXPECT_EQ(
        errorOf([&] { verify(g); }),
        "graph @g, node 0: relu: result 0 lists its use by input 0 of node 1 twice\n  %0 = relu(%x) : f32[4]@cpu");
  }
  {
    Graph g("g");
    auto [relu, neg] = make(g);
    Graph other("other");
    Value* z = other.addInput(f32({4}));
    std::vector<Value*> zin{z};
    Node* stranger = other.create(Op::exp, zin);
    usesOf(relu->output()).push_back({stranger, 0});
    EXPECT_EQ(errorOf([&] { verify(g); }),
              "graph @g, node 0: relu: result 0 has a use by a node that is not in this graph\n"
              "  %0 = relu(%x) : f32[4]@cpu");
    usesOf(relu->output()).pop_back();  // `other` dies first
  }
}

TEST(Verifier, GraphLevelErrorsOnParsedInputPointAtTheGraph) {
  ParseResult r = parseSource(
      "\ngraph @p(%x: f32[4]@cpu) -> (f32[4]@cpu) {\n  %0 = relu(%x) : f32[4]@cpu\n  return %0\n}\n", "p.kir");
  Graph& g = *r.graphs[0];
  EXPECT_EQ(errorOf([&] { verify(g, &r.locations); }), "no error");
  Node* relu = g.nodes()[0];
  usesOf(g.input(0)).push_back({relu, 0});
  EXPECT_EQ(errorOf([&] { verify(g, &r.locations); }),
            "p.kir:2:1: graph @p: input 0 lists its use by input 0 of node 0 twice");
  usesOf(g.input(0)).pop_back();
  g.setOutputs({nullptr});
  EXPECT_EQ(errorOf([&] { verify(g, &r.locations); }), "p.kir:4:3: graph @p: return value 0 is null");
}

}  // namespace
}  // namespace kiln::ir
