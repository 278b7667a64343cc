// Unit tests for printGraph against text written out by hand from the format
// of DESIGN.md §4 and ir/printer.h: named inputs, numbered values, names made
// unique, attributes of every kind in key order, a fusion node with several
// results whose body prints as a region, multiple graph outputs, and the empty
// graph.
#include "ir/printer.h"

#include <gtest/gtest.h>

#include "ir/graph.h"

namespace kiln::ir {
namespace {

TensorType f32(Shape shape) { return {DType::f32, std::move(shape), Device::cpu()}; }

Node* make(Graph& g, Op op, std::vector<Value*> inputs) { return g.create(op, inputs); }

TEST(Printer, GraphWithConstantAttributesAndAFusionRegion) {
  Graph g("demo");
  Value* x = g.addInput(f32({4, 8}), "x");
  Value* b = g.addInput(f32({8}), "b");
  Node* k = g.createConstant(0.5, f32({}));
  Node* m = make(g, Op::mul, {x, k->output()});

  std::vector<Value*> fin{m->output(), b};
  Node* f = g.appendRaw(Op::fusion, fin, {f32({4, 8}), f32({4, 8})},
                        {{"tile", std::vector<int64_t>{4, 8}},
                         {"axis", int64_t{-1}},
                         {"tag", std::string("k\"1")},
                         {"to", DType::f32},
                         {"eps", 0.25}});
  auto body = std::make_unique<Graph>("body");
  Value* p0 = body->addInput(f32({4, 8}), "x");  // clashes with the outer %x
  Value* p1 = body->addInput(f32({8}));
  Node* s = make(*body, Op::add, {p0, p1});
  Node* r = make(*body, Op::relu, {s->output()});
  body->setOutputs({s->output(), r->output()});
  f->setBody(std::move(body));

  Node* n = make(g, Op::neg, {f->output(1)});
  g.setOutputs({f->output(0), n->output()});

  const char* expected =
      "graph @demo(%x: f32[4,8]@cpu, %b: f32[8]@cpu) -> (f32[4,8]@cpu, f32[4,8]@cpu) {\n"
      "  %0 = constant() {value = 0.5} : f32[]@cpu\n"
      "  %1 = mul(%x, %0) : f32[4,8]@cpu\n"
      "  %2, %3 = fusion(%1, %b) {axis = -1, eps = 0.25, tag = \"k\\\"1\", tile = [4, 8], to = f32}"
      " : f32[4,8]@cpu, f32[4,8]@cpu {\n"
      "  ^(%x_1: f32[4,8]@cpu, %4: f32[8]@cpu):\n"
      "    %5 = add(%x_1, %4) : f32[4,8]@cpu\n"
      "    %6 = relu(%5) : f32[4,8]@cpu\n"
      "    return %5, %6\n"
      "  }\n"
      "  %7 = neg(%3) : f32[4,8]@cpu\n"
      "  return %2, %7\n"
      "}\n";
  EXPECT_EQ(printGraph(g), expected);
}

TEST(Printer, UnnamedInputsAreNumberedAndNamesAreMadeUnique) {
  Graph g("anon");
  Value* a = g.addInput(f32({2}));
  Value* x = g.addInput(f32({2}), "x");
  Value* x2 = g.addInput(f32({2}), "x");
  Node* s = make(g, Op::add, {a, x});
  s->output()->setName("1");  // takes %1: numbering skips it
  Node* m = make(g, Op::maximum, {s->output(), x2});
  g.setOutputs({m->output(), a});

  EXPECT_EQ(printGraph(g),
            "graph @anon(%0: f32[2]@cpu, %x: f32[2]@cpu, %x_1: f32[2]@cpu) -> (f32[2]@cpu, f32[2]@cpu) {\n"
            "  %1 = add(%0, %x) : f32[2]@cpu\n"
            "  %2 = maximum(%1, %x_1) : f32[2]@cpu\n"
            "  return %2, %0\n"
            "}\n");
}

TEST(Printer, DesignDocExampleShape) {
  // The shape of DESIGN.md §4's example, with the ops kiln has today.
  Graph g("relu_exp");
  Value* x = g.addInput(f32({8192, 1024}), "x");
  Value* w = g.addInput(f32({1024}), "w");
  Node* r = make(g, Op::relu, {x});
  Node* a = make(g, Op::add, {r->output(), w});
  g.setOutputs({a->output()});
  EXPECT_EQ(printGraph(g),
            "graph @relu_exp(%x: f32[8192,1024]@cpu, %w: f32[1024]@cpu) -> (f32[8192,1024]@cpu) {\n"
            "  %0 = relu(%x) : f32[8192,1024]@cpu\n"
            "  %1 = add(%0, %w) : f32[8192,1024]@cpu\n"
            "  return %1\n"
            "}\n");
}

TEST(Printer, EmptyGraph) {
  Graph g;
  EXPECT_EQ(printGraph(g), "graph @main() -> () {\n  return\n}\n");
}

TEST(Printer, PrintingTwiceGivesTheSameText) {
  Graph g;
  Value* x = g.addInput(f32({3}));
  Node* e = make(g, Op::exp, {x});
  g.setOutputs({e->output()});
  const std::string once = printGraph(g);
  EXPECT_EQ(printGraph(g), once) << "numbering restarts for every print";
  EXPECT_EQ(once, "graph @main(%0: f32[3]@cpu) -> (f32[3]@cpu) {\n  %1 = exp(%0) : f32[3]@cpu\n  return %1\n}\n");
}

}  // namespace
}  // namespace kiln::ir
