// Unit tests for the IR text parser (ir/parser.h): the round trip
// printGraph(parse(printGraph(g))) == printGraph(g) over the built-in models
// (rebuilt here with the IR builder, as tools/common/models.cpp traces them)
// before and after dce,fuse-elementwise, over hand-written texts with every
// attribute kind, scalar and CUDA types and several graphs per file, and over
// random graphs with clashing and numbered names; what the parser builds
// (types, attributes, names, locations); splitInputFile; every parse error
// with its exact file:line:col message; and inputs that must fail cleanly
// (every prefix and many byte mutations of a valid text, deep nesting).
#include "ir/parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "common/error_of.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"

namespace kiln::ir {
namespace {

TensorType f32(Shape shape, Device device = Device::cpu()) { return {DType::f32, std::move(shape), device}; }

Value* op(Graph& g, Op o, std::vector<Value*> in) { return g.create(o, in)->output(); }
Value* scalar(Graph& g, double v) { return g.createConstant(v, f32({}))->output(); }

// The built-in models of tools/common/models.cpp, built as tracing builds
// them: inputs x0, x1, ..., a scalar operand as a constant node just before
// its use.
struct ModelGraph {
  std::string name;
  std::function<void(Graph&)> build;
};

std::vector<ModelGraph> models() {
  return {
      {"chain8",
       [](Graph& g) {
         Value* x = g.addInput(f32({16 * 1024 * 1024}), "x0");
         Value* y = op(g, Op::relu, {op(g, Op::add, {op(g, Op::mul, {x, scalar(g, 1.5)}), scalar(g, 0.25)})});
         y = op(g, Op::mul, {op(g, Op::sub, {y, scalar(g, 0.5)}), scalar(g, 2.0)});
         y = op(g, Op::minimum, {op(g, Op::maximum, {y, scalar(g, -1.0)}), scalar(g, 4.0)});
         g.setOutputs({op(g, Op::neg, {y})});
       }},
      {"chain8_math",
       [](Graph& g) {
         Value* x = g.addInput(f32({16 * 1024 * 1024}), "x0");
         Value* y = op(g, Op::mul, {x, scalar(g, 1.5)});
         y = op(g, Op::add, {y, scalar(g, 0.25)});
         y = op(g, Op::relu, {y});
         y = op(g, Op::add, {y, scalar(g, 1.0)});
         y = op(g, Op::sqrt, {y});
         y = op(g, Op::sub, {y, scalar(g, 1.0)});
         y = op(g, Op::sigmoid, {y});
         g.setOutputs({op(g, Op::maximum, {y, scalar(g, 0.6)})});
       }},
      {"bias_relu",
       [](Graph& g) {
         Value* x = g.addInput(f32({4096, 4096}), "x0");
         Value* b = g.addInput(f32({4096}), "x1");
         g.setOutputs({op(g, Op::relu, {op(g, Op::add, {x, b})})});
       }},
      {"dead_code",
       [](Graph& g) {
         Value* x = g.addInput(f32({1024}), "x0");
         op(g, Op::mul, {op(g, Op::exp, {x}), scalar(g, 2.0)});
         g.setOutputs({op(g, Op::relu, {op(g, Op::add, {x, scalar(g, 1.0)})})});
       }},
      {"diamond",
       [](Graph& g) {
         Value* x = g.addInput(f32({64, 128}), "x0");
         Value* a = op(g, Op::relu, {x});
         Value* b = op(g, Op::exp, {x});
         g.setOutputs({op(g, Op::mul, {a, b}), op(g, Op::tanh, {a})});
       }},
      {"broadcast_producer",
       [](Graph& g) {
         Value* x = g.addInput(f32({256, 512}), "x0");
         Value* b = g.addInput(f32({512}), "x1");
         g.setOutputs({op(g, Op::relu, {op(g, Op::mul, {x, op(g, Op::sigmoid, {b})})})});
       }},
  };
}

void expectRoundTrip(const Graph& g) {
  const std::string text = printGraph(g);
  std::unique_ptr<Graph> parsed = parseGraph(text, "t.kir");
  EXPECT_EQ(printGraph(*parsed), text);
  EXPECT_NO_THROW(verify(*parsed));
}

TEST(ParserRoundTrip, BuiltInModelsBeforeAndAfterFusion) {
  for (const ModelGraph& m : models()) {
    SCOPED_TRACE(m.name);
    Graph g(m.name);
    m.build(g);
    expectRoundTrip(g);
    passes::PassManager("dce,fuse-elementwise").run(g);
    EXPECT_GT(g.nodes().size(), 0u);
    EXPECT_EQ(g.nodes()[0]->op(), Op::fusion) << "the pipeline ran";
    expectRoundTrip(g);
  }
}

TEST(ParserRoundTrip, FusedChainAsIrdumpPrintsIt) {
  // What `irdump --example diamond --passes=dce,fuse-elementwise` prints.
  const std::string text =
      "graph @diamond(%x0: f32[64,128]@cpu) -> (f32[64,128]@cpu, f32[64,128]@cpu) {\n"
      "  %0, %1 = fusion(%x0) : f32[64,128]@cpu, f32[64,128]@cpu {\n"
      "  ^(%2: f32[64,128]@cpu):\n"
      "    %3 = relu(%2) : f32[64,128]@cpu\n"
      "    %4 = exp(%2) : f32[64,128]@cpu\n"
      "    %5 = mul(%3, %4) : f32[64,128]@cpu\n"
      "    %6 = tanh(%3) : f32[64,128]@cpu\n"
      "    return %5, %6\n"
      "  }\n"
      "  return %0, %1\n"
      "}\n";
  std::unique_ptr<Graph> g = parseGraph(text, "t.kir");
  EXPECT_EQ(printGraph(*g), text);
  ASSERT_EQ(g->numNodes(), 1);
  const Node* f = g->nodes()[0];
  EXPECT_EQ(f->op(), Op::fusion);
  EXPECT_EQ(f->numOutputs(), 2);
  ASSERT_NE(f->body(), nullptr);
  EXPECT_EQ(f->body()->numNodes(), 4);
  EXPECT_EQ(f->body()->numInputs(), 1);
  EXPECT_EQ(f->body()->outputs().size(), 2u);
  EXPECT_EQ(g->outputs()[1], f->output(1));
  EXPECT_EQ(f->input(0), g->input(0));
  EXPECT_EQ(g->input(0)->uses().size(), 1u);
}

TEST(ParserRoundTrip, EveryAttributeKindScalarsAndDevices) {
  const std::string text =
      "graph @attrs(%x: f32[4,8]@cuda:1, %s: f32[]@cuda:1, %e: f32[0,3]@cpu) -> (f32[4,8]@cuda:1) {\n"
      "  %0 = constant() {value = 1.0e-05} : f32[]@cuda:1\n"
      "  %1 = add(%x, %0) {a_int = -9223372036854775808, b_float = 2.5e+20, c_nan = nan, d_inf = inf, "
      "e_ninf = -inf, f_str = \"q\\\"b\\\\s\\n\\t\\r\\x01\\x7f \xc3\xa9\", g_list = [1, -2, 3], h_empty = [], "
      "i_dtype = bf16, j_zero = -0.0, k_str = \"\"} : f32[4,8]@cuda:1\n"
      "  return %1\n"
      "}\n";
  std::unique_ptr<Graph> g = parseGraph(text, "t.kir");
  EXPECT_EQ(printGraph(*g), text);
  const Attributes& a = g->nodes()[1]->attrs();
  EXPECT_EQ(std::get<int64_t>(a.at("a_int")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(std::get<double>(a.at("b_float")), 2.5e20);
  EXPECT_TRUE(std::isnan(std::get<double>(a.at("c_nan"))));
  EXPECT_EQ(std::get<double>(a.at("d_inf")), std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<double>(a.at("e_ninf")), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<std::string>(a.at("f_str")), "q\"b\\s\n\t\r\x01\x7f \xc3\xa9");
  EXPECT_EQ(std::get<std::vector<int64_t>>(a.at("g_list")), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_TRUE(std::get<std::vector<int64_t>>(a.at("h_empty")).empty());
  EXPECT_EQ(std::get<DType>(a.at("i_dtype")), DType::bf16);
  EXPECT_TRUE(std::signbit(std::get<double>(a.at("j_zero"))));
  EXPECT_EQ(std::get<std::string>(a.at("k_str")), "");
  EXPECT_EQ(std::get<double>(g->nodes()[0]->attrs().at("value")), 1e-05);
  EXPECT_EQ(g->input(0)->type(), f32({4, 8}, Device::cuda(1)));
  EXPECT_EQ(g->input(1)->type(), f32({}, Device::cuda(1)));
  EXPECT_EQ(g->input(2)->type().shape, (Shape{0, 3}));
}

TEST(ParserRoundTrip, StringsWithEveryByteSurvive) {
  std::string all;
  for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
  Graph g("bytes");
  Value* x = g.addInput(f32({2}), "x");
  Node* n = g.create(Op::relu, std::vector<Value*>{x}, {{"s", all}});
  g.setOutputs({n->output()});
  const std::string text = printGraph(g);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << "control characters are escaped: " << text;
  std::unique_ptr<Graph> back = parseGraph(text, "t.kir");
  EXPECT_EQ(std::get<std::string>(back->nodes()[0]->attrs().at("s")), all);
  EXPECT_EQ(printGraph(*back), text);
}

TEST(ParserRoundTrip, SeveralGraphsInOneFileWithComments) {
  const std::string text =
      "// a comment line\n"
      "graph @a(%x: f32[2]@cpu) -> (f32[2]@cpu) {  // trailing comment\n"
      "  %0 = neg(%x) : f32[2]@cpu\n"
      "  return %0\n"
      "}\n"
      "\n"
      "graph @b() -> () {\n"
      "  return\n"
      "}\n"
      "graph @c(%y: f32[3]@cpu) -> (f32[3]@cpu, f32[3]@cpu) {\n"
      "  return %y, %y\n"
      "}\n";
  std::vector<std::unique_ptr<Graph>> graphs = parseModule(text, "t.kir");
  ASSERT_EQ(graphs.size(), 3u);
  EXPECT_EQ(graphs[0]->name(), "a");
  EXPECT_EQ(graphs[1]->name(), "b");
  EXPECT_EQ(graphs[2]->name(), "c");
  EXPECT_EQ(printGraph(*graphs[0]),
            "graph @a(%x: f32[2]@cpu) -> (f32[2]@cpu) {\n  %0 = neg(%x) : f32[2]@cpu\n  return %0\n}\n");
  EXPECT_EQ(printGraph(*graphs[1]), "graph @b() -> () {\n  return\n}\n");
  EXPECT_EQ(printGraph(*graphs[2]), "graph @c(%y: f32[3]@cpu) -> (f32[3]@cpu, f32[3]@cpu) {\n  return %y, %y\n}\n");
  EXPECT_TRUE(parseModule("", "t.kir").empty());
  EXPECT_TRUE(parseModule("// only a comment\n\n", "t.kir").empty());
}

TEST(ParserRoundTrip, BlanksAndNewlinesAreFree) {
  std::unique_ptr<Graph> g = parseGraph(
      "graph @g ( %x : f32 [ 2 , 3 ] @cpu ) -> ( f32[2,3]@cpu )\n{ %0 = relu ( %x ) { } :\n f32[2,3] @cpu return %0 }",
      "t.kir");
  EXPECT_EQ(printGraph(*g),
            "graph @g(%x: f32[2,3]@cpu) -> (f32[2,3]@cpu) {\n  %0 = relu(%x) : f32[2,3]@cpu\n  return %0\n}\n");
}

// Random graphs with names that clash, numbered names out of order and
// unnamed values: the text reads back to the same text.
TEST(ParserRoundTrip, RandomGraphsWithAwkwardNames) {
  std::mt19937 rng(42);
  const std::vector<std::string> names = {"", "", "", "x", "x", "x_1", "0", "1", "3", "7", "a.b", "$t", "007"};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  for (int trial = 0; trial < 200; ++trial) {
    Graph g("random");
    std::vector<Value*> values;
    for (size_t i = 0, n = 1 + pick(3); i < n; ++i) values.push_back(g.addInput(f32({4}), names[pick(names.size())]));
    for (size_t i = 0, n = pick(8); i < n; ++i) {
      Value* v = nullptr;
      switch (pick(3)) {
        case 0: v = op(g, Op::add, {values[pick(values.size())], values[pick(values.size())]}); break;
        case 1: v = op(g, Op::exp, {values[pick(values.size())]}); break;
        case 2: v = scalar(g, static_cast<double>(pick(100)) / 7); break;
      }
      v->setName(names[pick(names.size())]);
      values.push_back(v);
    }
    std::vector<Value*> outs;
    for (size_t i = 0, n = pick(3); i < n; ++i) outs.push_back(values[pick(values.size())]);
    g.setOutputs(outs);
    if (pick(2)) passes::PassManager("dce,fuse-elementwise").run(g);
    SCOPED_TRACE(printGraph(g));
    expectRoundTrip(g);
  }
}

TEST(Parser, NumberedNamesThePrinterWouldGiveAreNotKept) {
  std::unique_ptr<Graph> g = parseGraph(
      "graph @g(%x: f32[2]@cpu, %5: f32[2]@cpu) -> (f32[2]@cpu) {\n"
      "  %0 = relu(%x) : f32[2]@cpu\n"
      "  %1 = add(%0, %5) : f32[2]@cpu\n"
      "  %y = exp(%1) : f32[2]@cpu\n"
      "  %3 = neg(%y) : f32[2]@cpu\n"
      "  return %3\n"
      "}\n",
      "t.kir");
  const auto nodes = g->nodes();
  EXPECT_EQ(g->input(0)->name(), "x");
  EXPECT_EQ(g->input(1)->name(), "5") << "the printer would number it %0";
  EXPECT_EQ(nodes[0]->output()->name(), "");
  EXPECT_EQ(nodes[1]->output()->name(), "");
  EXPECT_EQ(nodes[2]->output()->name(), "y");
  EXPECT_EQ(nodes[3]->output()->name(), "3") << "the printer would number it %2";
  // After dce-like edits, unnamed values are renumbered, kept names stay.
  EXPECT_EQ(printGraph(*g),
            "graph @g(%x: f32[2]@cpu, %5: f32[2]@cpu) -> (f32[2]@cpu) {\n"
            "  %0 = relu(%x) : f32[2]@cpu\n"
            "  %1 = add(%0, %5) : f32[2]@cpu\n"
            "  %y = exp(%1) : f32[2]@cpu\n"
            "  %3 = neg(%y) : f32[2]@cpu\n"
            "  return %3\n"
            "}\n");
}

TEST(Parser, RecordsWhereNodesGraphsAndReturnsWere) {
  const std::string text =
      "// header comment\n"
      "graph @g(%x: f32[2]@cpu) -> (f32[2]@cpu) {\n"
      "  %0 = fusion(%x) : f32[2]@cpu {\n"
      "  ^(%1: f32[2]@cpu):\n"
      "      %2 = relu(%1) : f32[2]@cpu\n"
      "    return %2\n"
      "  }\n"
      " return %0\n"
      "}\n";
  ParseResult r = parseSource(text, "dir/t.kir", 10);
  ASSERT_EQ(r.graphs.size(), 1u);
  const Graph& g = *r.graphs[0];
  const Node* f = g.nodes()[0];
  const Node* relu = f->body()->nodes()[0];
  EXPECT_EQ(r.locations.file, "dir/t.kir");
  EXPECT_EQ(r.locations.prefix(f), "dir/t.kir:12:3: ");
  EXPECT_EQ(r.locations.prefix(relu), "dir/t.kir:14:7: ");
  EXPECT_EQ(r.locations.str(r.locations.graphs.at(&g)), "dir/t.kir:11:1");
  EXPECT_EQ(r.locations.str(r.locations.graphs.at(f->body())), "dir/t.kir:13:3");
  EXPECT_EQ(r.locations.returnPrefix(&g), "dir/t.kir:17:2: ");
  EXPECT_EQ(r.locations.returnPrefix(f->body()), "dir/t.kir:15:5: ");
  EXPECT_EQ(r.locations.prefix(nullptr), "");
  EXPECT_EQ(f->body()->name(), "fused");
}

TEST(SplitInputFile, CutsAtSeparatorLinesAndKeepsLineNumbers) {
  const std::string text =
      "// RUN: irdump %s\n"                             // 1
      "graph @a() -> () {\n  return\n}\n"               // 2-4
      "// -----\n"                                      // 5
      "graph @b() -> () {\n  return %nope\n}\n"         // 6-8
      "  // ----- indented separator with a comment\n"  // 9
      "\n"                                              // 10
      "graph @c() -> () {\n  return\n}";                // 11-13
  std::vector<SourceChunk> chunks = splitInputFile(text);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].firstLine, 1);
  EXPECT_EQ(chunks[0].text, "// RUN: irdump %s\ngraph @a() -> () {\n  return\n}\n");
  EXPECT_EQ(chunks[1].firstLine, 6);
  EXPECT_EQ(chunks[1].text, "graph @b() -> () {\n  return %nope\n}\n");
  EXPECT_EQ(chunks[2].firstLine, 10);
  EXPECT_EQ(chunks[2].text, "\ngraph @c() -> () {\n  return\n}");
  EXPECT_EQ(errorOf([&] { parseSource(chunks[1].text, "t.kir", chunks[1].firstLine); }),
            "t.kir:7:10: unknown value %nope in the return of graph @b");
  EXPECT_EQ(parseSource(chunks[2].text, "t.kir", chunks[2].firstLine).graphs[0]->name(), "c");

  EXPECT_EQ(splitInputFile("").size(), 1u);
  std::vector<SourceChunk> edge = splitInputFile("// -----\n// -----");
  ASSERT_EQ(edge.size(), 3u);
  EXPECT_EQ(edge[0].text, "");
  EXPECT_EQ(edge[1].text, "");
  EXPECT_EQ(edge[2].text, "");
  EXPECT_EQ(edge[2].firstLine, 3);
  EXPECT_EQ(splitInputFile("a\n//----\nb").size(), 1u) << "four dashes, no space: not a separator";
}

// Each bad input and its whole message. Line 1 is the header below unless a
// case replaces it.
struct BadInput {
  const char* text;
  const char* message;
};

constexpr const char* kHead = "graph @g(%x: f32[4]@cpu, %y: f32[4]@cpu) -> (f32[4]@cpu) {\n";

TEST(ParserErrors, BodyOfAGraph) {
  const BadInput cases[] = {
      {"  %0 = add(%x %y) : f32[4]@cpu\n", "t.kir:2:15: expected ')' after operands of add, found '%y'"},
      {"  %0 = frobnicate(%x) : f32[4]@cpu\n", "t.kir:2:8: unknown op 'frobnicate'"},
      {"  %0 = add(%x, %z) : f32[4]@cpu\n", "t.kir:2:16: unknown value %z (operand 1 of add)"},
      {"  %0 = relu(%0) : f32[4]@cpu\n", "t.kir:2:13: unknown value %0 (operand 0 of relu)"},
      {"  %x = relu(%y) : f32[4]@cpu\n", "t.kir:2:3: redefinition of %x (first defined at t.kir:1:10)"},
      {"  %0, %0 = fusion(%y) : f32[4]@cpu, f32[4]@cpu\n",
       "t.kir:2:7: redefinition of %0 (first defined at t.kir:2:3)"},
      {"  %0 = relu(%x) : f32[4]@cpu\n  %0 = relu(%x) : f32[4]@cpu\n",
       "t.kir:3:3: redefinition of %0 (first defined at t.kir:2:3)"},
      {"  %0 %1 = relu(%x) : f32[4]@cpu\n", "t.kir:2:6: expected '=' after %0, found '%1'"},
      {"  %0, = relu(%x) : f32[4]@cpu\n", "t.kir:2:7: expected a result name ('%name') after ',', found '='"},
      {"  %0 = (%x) : f32[4]@cpu\n", "t.kir:2:8: expected an op name after '=', found '('"},
      {"  %0 = relu %x : f32[4]@cpu\n", "t.kir:2:13: expected '(' after relu, found '%x'"},
      {"  %0 = add(%x, ) : f32[4]@cpu\n", "t.kir:2:16: expected an operand ('%name') of add, found ')'"},
      {"  %0 = relu(%x) f32[4]@cpu\n", "t.kir:2:17: expected ':' and the result types of relu, found 'f32'"},
      {"  %0 = relu(%x) : f32[4]@cpu, f32[4]@cpu\n", "t.kir:2:3: relu has 1 result but 2 result types"},
      {"  %0 = relu(%x) : f32[4]@cpu {\n", "t.kir:2:30: relu cannot have a body; only fusion nodes do"},
      {"  %0 = relu(%x) : f32[4]@cpu garbage\n",
       "t.kir:2:30: expected an op line or 'return' in graph @g, found 'garbage'"},
      {"  %0 = relu(%x) : f32[4]@cpu\n", "t.kir:3:1: expected an op line or 'return' in graph @g, found end of input"},
      {"  return %0\n}\n", "t.kir:2:10: unknown value %0 in the return of graph @g"},
      {"  return %x %y\n}\n", "t.kir:2:13: expected '}' after the return of graph @g, found '%y'"},
      {"  return %x,\n}\n", "t.kir:3:1: expected a value ('%name') in the return of graph @g, found '}'"},
      {"  return %x\n", "t.kir:3:1: expected '}' after the return of graph @g, found end of input"},
      {"  return\n}\n", "t.kir:2:3: graph @g returns 0 values but its header declares 1 result type"},
      {"  %0 = add(%x, %y) : f32[4]@cpu\n  return %0, %0\n}\n",
       "t.kir:3:3: graph @g returns 2 values but its header declares 1 result type"},
      {"  %0 = exp(%x) : f32[2,2]@cpu\n  return %0\n}\n",
       "t.kir:3:3: return value 0 of graph @g has type f32[2,2]@cpu, but its header declares f32[4]@cpu"},
      {"  return %x\n}\n}\n", "t.kir:4:1: expected 'graph' or end of input, found '}'"},
      {"  return %x\n} trailing\n", "t.kir:3:3: expected 'graph' or end of input, found 'trailing'"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(errorOf([&] { parseModule(std::string(kHead) + c.text, "t.kir"); }), c.message);
  }
}

TEST(ParserErrors, Attributes) {
  const BadInput cases[] = {
      {"  %0 = relu(%x) {a = } : f32[4]@cpu\n",
       "t.kir:2:22: expected a value for attribute a (an integer, float, string, [int list] or dtype), found '}'"},
      {"  %0 = relu(%x) {a = foo} : f32[4]@cpu\n",
       "t.kir:2:22: expected a value for attribute a (an integer, float, string, [int list] or dtype), found 'foo'"},
      {"  %0 = relu(%x) {a 1} : f32[4]@cpu\n", "t.kir:2:20: expected '=' after attribute a, found '1'"},
      {"  %0 = relu(%x) {1 = 1} : f32[4]@cpu\n",
       "t.kir:2:18: expected an attribute name in the attributes of relu, found '1'"},
      {"  %0 = relu(%x) {a = 1, a = 2} : f32[4]@cpu\n", "t.kir:2:25: duplicate attribute 'a' on relu"},
      {"  %0 = relu(%x) {a = 1 b = 2} : f32[4]@cpu\n",
       "t.kir:2:24: expected ',' or '}' after the attributes of relu, found 'b'"},
      {"  %0 = relu(%x) {a = [1, 2.5]} : f32[4]@cpu\n",
       "t.kir:2:26: expected an integer in the list of attribute a, found '2.5'"},
      {"  %0 = relu(%x) {a = [1 2]} : f32[4]@cpu\n",
       "t.kir:2:25: expected ',' or ']' in the list of attribute a, found '2'"},
      {"  %0 = relu(%x) {a = 99999999999999999999} : f32[4]@cpu\n",
       "t.kir:2:22: integer 99999999999999999999 out of range (int64)"},
      {"  %0 = relu(%x) {a = 1.0e999} : f32[4]@cpu\n", "t.kir:2:22: float 1.0e999 out of range (f64)"},
      {"  %0 = relu(%x) {a = 1.5x} : f32[4]@cpu\n", "t.kir:2:22: bad number '1.5x'"},
      {"  %0 = relu(%x) {a = 1e} : f32[4]@cpu\n", "t.kir:2:22: bad number '1e'"},
      {"  %0 = relu(%x) {a = 1.2.3} : f32[4]@cpu\n", "t.kir:2:22: bad number '1.2.3'"},
      {"  %0 = relu(%x) {a = -nan} : f32[4]@cpu\n", "t.kir:2:22: unexpected character '-'"},
      {"  %0 = relu(%x) {a = \"abc} : f32[4]@cpu\n", "t.kir:2:22: unterminated string"},
      {"  %0 = relu(%x) {a = \"abc\\", "t.kir:2:22: unterminated string"},
      {"  %0 = relu(%x) {a = \"a\\qb\"} : f32[4]@cpu\n", "t.kir:2:24: unknown escape '\\q' in string"},
      {"  %0 = relu(%x) {a = \"a\\x4\"} : f32[4]@cpu\n", "t.kir:2:24: expected two hex digits after '\\x' in string"},
      {"  %0 = relu(%x) {a = \"a\tb\"} : f32[4]@cpu\n", "t.kir:2:24: control character \\x09 in string; escape it"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(errorOf([&] { parseModule(std::string(kHead) + c.text, "t.kir"); }), c.message);
  }
}

TEST(ParserErrors, Types) {
  const BadInput cases[] = {
      {"  %0 = relu(%x) : f33[4]@cpu\n",
       "t.kir:2:19: unknown dtype 'f33'; expected f32, f16, bf16, f64, i32, i64 or bool"},
      {"  %0 = relu(%x) : [4]@cpu\n", "t.kir:2:19: expected a result type of relu (a type like f32[4]@cpu), found '['"},
      {"  %0 = relu(%x) : f32(4)@cpu\n", "t.kir:2:22: expected '[' after dtype f32, found '('"},
      {"  %0 = relu(%x) : f32[4 4]@cpu\n", "t.kir:2:25: expected ',' or ']' in a shape, found '4'"},
      {"  %0 = relu(%x) : f32[a]@cpu\n", "t.kir:2:23: expected a dimension (an integer) in a shape, found 'a'"},
      {"  %0 = relu(%x) : f32[-4]@cpu\n", "t.kir:2:23: negative dimension -4 in a shape"},
      {"  %0 = relu(%x) : f32[4294967296,4294967296]@cpu\n", "t.kir:2:34: shape has more than 2^63-1 elements"},
      {"  %0 = relu(%x) : f32[4]\n", "t.kir:3:1: expected '@' and a device after f32[4], found end of input"},
      {"  %0 = relu(%x) : f32[4]@gpu\n", "t.kir:2:25: unknown device 'gpu' in f32[4]; expected cpu, cuda:N or opencl:N"},
      {"  %0 = relu(%x) : f32[4]@cuda:x\n", "t.kir:2:25: unknown device 'cuda:x' in f32[4]; expected cpu, cuda:N or opencl:N"},
      {"  %0 = relu(%x) : f32[4]@cuda:-1\n", "t.kir:2:25: unknown device 'cuda:' in f32[4]; expected cpu, cuda:N or opencl:N"},
      {"  %0 = relu(%x) : f32[4]@cuda:99999999999\n",
       "t.kir:2:25: unknown device 'cuda:99999999999' in f32[4]; expected cpu, cuda:N or opencl:N"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(errorOf([&] { parseModule(std::string(kHead) + c.text, "t.kir"); }), c.message);
  }
}

TEST(ParserErrors, HeadersAndTopLevel) {
  const BadInput cases[] = {
      {"grap @g() -> () {\n  return\n}\n", "t.kir:1:1: expected 'graph' or end of input, found 'grap'"},
      {"graph g() -> () {\n  return\n}\n", "t.kir:1:7: expected a graph name ('@name') after 'graph', found 'g'"},
      {"graph @() -> () {\n", "t.kir:1:7: expected a name after '@'"},
      {"graph @g -> () {\n", "t.kir:1:10: expected '(' after graph @g, found '->'"},
      {"graph @g(x: f32[4]@cpu) -> () {\n", "t.kir:1:10: expected an input name ('%name') in graph @g, found 'x'"},
      {"graph @g(% : f32[4]@cpu) -> () {\n", "t.kir:1:10: expected a name after '%'"},
      {"graph @g(%x f32[4]@cpu) -> () {\n", "t.kir:1:13: expected ':' after %x, found 'f32'"},
      {"graph @g(%x: f32[4]@cpu %y: f32[4]@cpu) -> () {\n",
       "t.kir:1:25: expected ')' after the inputs of graph @g, found '%y'"},
      {"graph @g(%x: f32[4]@cpu, %x: f32[4]@cpu) -> () {\n",
       "t.kir:1:26: redefinition of %x (first defined at t.kir:1:10)"},
      {"graph @g() (f32[4]@cpu) {\n", "t.kir:1:12: expected '->' after the inputs of graph @g, found '('"},
      {"graph @g() -> f32[4]@cpu {\n", "t.kir:1:15: expected '(' after '->' in graph @g, found 'f32'"},
      {"graph @g() -> (f32[4]@cpu f32[4]@cpu) {\n",
       "t.kir:1:27: expected ')' after the result types of graph @g, found 'f32'"},
      {"graph @g() -> () \n  return\n}\n", "t.kir:2:3: expected '{' after the header of graph @g, found 'return'"},
      {"graph @g() -> () {\n  return\n}\ngraph @g() -> () {\n  return\n}\n",
       "t.kir:4:7: redefinition of graph @g (first defined at t.kir:1:7)"},
      {"graph @g() -> () {\n  return\n}\n#", "t.kir:4:1: unexpected character '#'"},
      {"graph @g() -> () {\n  return\n}\n/ x", "t.kir:4:1: unexpected character '/'"},
      {"graph @g() -> () {\n  return\n}\n\x01", "t.kir:4:1: unexpected character '\\x01'"},
      {"graph @g() -> () {\n  return\n}\n\xc3\xa9", "t.kir:4:1: unexpected character '\\xc3'"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(errorOf([&] { parseModule(c.text, "t.kir"); }), c.message);
  }
}

TEST(ParserErrors, FusionBodies) {
  const BadInput cases[] = {
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu):\n    %2 = add(%1, %y) : f32[4]@cpu\n",
       "t.kir:4:18: %y is defined outside this fusion body (at t.kir:1:26); a body sees only its block arguments "
       "and its own values"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu):\n    return %1\n  }\n  return %1\n}\n",
       "t.kir:6:10: %1 is defined inside a fusion body (at t.kir:3:5) and is not visible here"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%x: f32[4]@cpu):\n",
       "t.kir:3:5: redefinition of %x (first defined at t.kir:1:10)"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  (%1: f32[4]@cpu):\n",
       "t.kir:3:3: expected '^' and the block arguments of the body of fusion %0, found '('"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^%1: f32[4]@cpu:\n", "t.kir:3:4: expected '(' after '^', found '%1'"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu)\n    return %1\n",
       "t.kir:4:5: expected ':' after the block arguments of the body of fusion %0, found 'return'"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu):\n    %2 = relu(%1) : f32[4]@cpu\n",
       "t.kir:5:1: expected an op line or 'return' in the body of fusion %0, found end of input"},
      {"  %0 = fusion(%x) : f32[4]@cpu {\n  ^(%1: f32[4]@cpu):\n    return %1\n",
       "t.kir:5:1: expected '}' after the return of the body of fusion %0, found end of input"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(errorOf([&] { parseModule(std::string(kHead) + c.text, "t.kir"); }), c.message);
  }
}

TEST(ParserErrors, ParseGraphWantsExactlyOne) {
  EXPECT_EQ(errorOf([] { parseGraph("// nothing\n", "t.kir"); }), "t.kir:2:1: expected a graph, found end of input");
  EXPECT_EQ(errorOf([] { parseGraph("graph @a() -> () {\n  return\n}\ngraph @b() -> () {\n  return\n}\n", "t.kir"); }),
            "t.kir:4:1: expected one graph, found a second one (@b)");
}

TEST(ParserErrors, NestingIsCapped) {
  // Level i's operand is the block argument of level i-1 (%x at the top).
  auto build = [](int levels) {
    std::string text = "graph @deep(%x: f32[4]@cpu) -> (f32[4]@cpu) {\n";
    for (int i = 0; i < levels; ++i)
      text += fmt::format("%r{} = fusion({}) : f32[4]@cpu {{\n^(%a{}: f32[4]@cpu):\n", i,
                          i == 0 ? std::string("%x") : fmt::format("%a{}", i - 1), i);
    for (int i = levels - 1; i >= 0; --i) text += fmt::format("return %a{}\n}}\n", i);
    return text + "return %r0\n}\n";
  };
  std::unique_ptr<Graph> g = parseGraph(build(kMaxNesting), "t.kir");
  int depth = 0;
  for (const Graph* b = g.get(); b->numNodes() > 0; b = b->nodes()[0]->body()) ++depth;
  EXPECT_EQ(depth, kMaxNesting);
  EXPECT_EQ(errorOf([&] { parseGraph(build(kMaxNesting + 1), "t.kir"); }),
            fmt::format("t.kir:{}:34: fusion bodies nested deeper than 64 levels", 2 * kMaxNesting + 2));
  EXPECT_EQ(errorOf([&] { parseGraph(build(100000), "t.kir"); }),
            fmt::format("t.kir:{}:34: fusion bodies nested deeper than 64 levels", 2 * kMaxNesting + 2))
      << "deep input stops at the cap, whatever its depth";
}

// No input crashes the parser: every prefix of a valid text, and many random
// byte edits of it, either parse or throw kiln::Error.
TEST(ParserErrors, MangledInputsFailCleanly) {
  const std::string valid =
      "graph @g(%x: f32[4,8]@cpu, %b: f32[8]@cuda:0) -> (f32[4,8]@cpu) {\n"
      "  %0 = constant() {value = 1.0e-05} : f32[]@cpu\n"
      "  %1, %2 = fusion(%x, %b) {s = \"a\\\"\\x01\", l = [1, -2], d = f32, f = -inf} : f32[4,8]@cpu, f32[4,8]@cpu {\n"
      "  ^(%3: f32[4,8]@cpu, %4: f32[8]@cpu):\n"
      "    %5 = add(%3, %4) : f32[4,8]@cpu\n"
      "    return %5, %5\n"
      "  }\n"
      "  return %2  // done\n"
      "}\n";
  ASSERT_NO_THROW(parseModule(valid, "t.kir"));
  int errors = 0;
  auto attempt = [&](const std::string& text) {
    try {
      auto graphs = parseModule(text, "t.kir");
      for (auto& g : graphs) printGraph(*g);
    } catch (const Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).rfind("t.kir:", 0), 0u) << e.what();
    }
  };
  for (size_t n = 0; n < valid.size(); ++n) attempt(valid.substr(0, n));
  std::mt19937 rng(7);
  const std::string alphabet = "%@^(){}[],:=-> \n\"\\x0123456789.eE_abfinr/\x01\xff";
  for (int trial = 0; trial < 5000; ++trial) {
    std::string text = valid;
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 2: text.erase(at, 1); break;
      }
    }
    attempt(text);
  }
  EXPECT_GT(errors, 5000);
}

}  // namespace
}  // namespace kiln::ir
