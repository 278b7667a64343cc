// The library calls' type rules (ir/library_rules.cpp): matmul's shapes
// (batch broadcasting, ranks >= 2) and dtypes, index_select and index_add's
// dims, indices and sources, the exact message of each error, and that a
// graph of library ops prints and parses back to the same text.
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace {

using namespace kiln;
using ir::Op;

ir::TensorType t(DType d, ir::Shape s) { return {d, std::move(s), Device::cpu()}; }
ir::TensorType f32(ir::Shape s) { return t(DType::f32, std::move(s)); }
ir::TensorType i64(ir::Shape s) { return t(DType::i64, std::move(s)); }

ir::TensorType infer(Op op, std::vector<ir::TensorType> in, ir::Attributes attrs = {}) {
  return ir::inferType(op, in, attrs);
}
ir::Attributes dim(int64_t d) { return {{"dim", d}}; }

TEST(LibraryRules, MatmulShapes) {
  EXPECT_EQ(infer(Op::matmul, {f32({2, 3}), f32({3, 4})}), f32({2, 4}));
  EXPECT_EQ(infer(Op::matmul, {f32({5, 2, 3}), f32({3, 4})}), f32({5, 2, 4}));
  EXPECT_EQ(infer(Op::matmul, {f32({2, 3}), f32({7, 3, 4})}), f32({7, 2, 4}));
  EXPECT_EQ(infer(Op::matmul, {f32({6, 1, 2, 3}), f32({5, 3, 4})}), f32({6, 5, 2, 4}));
  EXPECT_EQ(infer(Op::matmul, {f32({0, 3}), f32({3, 0})}), f32({0, 0}));
  for (DType d : {DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
    EXPECT_EQ(infer(Op::matmul, {t(d, {2, 2}), t(d, {2, 2})}).dtype, d);
}

TEST(LibraryRules, MatmulErrors) {
  EXPECT_EQ(errorOf([] {
              infer(Op::matmul, {f32({2, 3}), f32({4, 5})});
            }),
            "matmul: shapes f32[2,3]@cpu and f32[4,5]@cpu cannot be multiplied (3 != 4)");
  EXPECT_EQ(errorOf([] {
              infer(Op::matmul, {f32({3}), f32({3, 4})});
            }),
            "matmul: expected operands of rank 2 or more, got f32[3]@cpu and f32[3,4]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::matmul, {f32({2, 3}), t(DType::f64, {3, 4})});
            }),
            "matmul: expected both operands of one dtype, got f32[2,3]@cpu and f64[3,4]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::matmul, {t(DType::boolean, {2, 2}), t(DType::boolean, {2, 2})});
            }),
            "matmul: dtype bool is not supported, got bool[2,2]@cpu and bool[2,2]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::matmul, {f32({2, 2, 3}), f32({5, 3, 4})});
            }),
            "matmul: batch dimensions [2] and [5] of f32[2,2,3]@cpu and f32[5,3,4]@cpu do not broadcast");
}

TEST(LibraryRules, IndexSelectAndIndexAdd) {
  EXPECT_EQ(infer(Op::index_select, {f32({5, 3}), i64({7})}, dim(0)), f32({7, 3}));
  EXPECT_EQ(infer(Op::index_select, {t(DType::boolean, {5, 3}), t(DType::i32, {2})}, dim(1)),
            t(DType::boolean, {5, 2}));
  EXPECT_EQ(infer(Op::index_add, {f32({5, 3}), i64({4}), f32({4, 3})}, dim(0)), f32({5, 3}));
  EXPECT_EQ(infer(Op::index_add, {t(DType::i32, {5, 3}), i64({2}), t(DType::i32, {5, 2})}, dim(1)),
            t(DType::i32, {5, 3}));

  EXPECT_EQ(errorOf([] {
              infer(Op::index_select, {f32({5, 3}), i64({7})}, dim(2));
            }),
            "index_select: dim 2 is out of range for f32[5,3]@cpu (expected 0 <= dim < 2)");
  EXPECT_EQ(errorOf([] {
              infer(Op::index_select, {f32({5, 3}), f32({7})}, dim(0));
            }),
            "index_select: expected a 1-d index of dtype i64 or i32, got f32[7]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::index_select, {f32({5, 3}), i64({7, 1})}, dim(0));
            }),
            "index_select: expected a 1-d index of dtype i64 or i32, got i64[7,1]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::index_select, {f32({}), i64({1})}, dim(0));
            }),
            "index_select: expected a tensor of rank 1 or more, got f32[]@cpu");
  EXPECT_EQ(errorOf([] { infer(Op::index_select, {f32({5, 3}), i64({7})}); }), "index_select: missing attribute 'dim'");
  EXPECT_EQ(errorOf([] {
              infer(Op::index_add, {f32({5, 3}), i64({4}), f32({3, 3})}, dim(0));
            }),
            "index_add: expected a source of shape [4,3] (x's, with the index's length 4 at dim 0), got f32[5,3]@cpu, "
            "i64[4]@cpu and f32[3,3]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::index_add, {f32({5, 3}), i64({4}), t(DType::f64, {4, 3})}, dim(0));
            }),
            "index_add: expected a source of the dtype of x, got f32[5,3]@cpu, i64[4]@cpu and f64[4,3]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::index_add, {t(DType::boolean, {2}), i64({1}), t(DType::boolean, {1})}, dim(0));
            }),
            "index_add: dtype bool is not supported, got bool[2]@cpu, i64[1]@cpu and bool[1]@cpu");
}

TEST(LibraryRules, LibraryOpsPrintParseAndVerify) {
  ir::Graph g("lib");
  ir::Value* x = g.addInput(f32({4, 8}), "x");
  ir::Value* w = g.addInput(f32({16, 8}), "w");
  ir::Value* idx = g.addInput(t(DType::i32, {3}), "idx");
  ir::Value* wt = g.create(Op::transpose, std::vector<ir::Value*>{w}, {{"perm", std::vector<int64_t>{1, 0}}})->output();
  ir::Value* y = g.create(Op::matmul, std::vector<ir::Value*>{x, wt})->output();
  ir::Value* s = g.create(Op::index_select, std::vector<ir::Value*>{y, idx}, dim(0))->output();
  ir::Value* a = g.create(Op::index_add, std::vector<ir::Value*>{y, idx, s}, dim(0))->output();
  g.setOutputs({a});
  ir::verify(g);
  const std::string text = ir::printGraph(g);
  EXPECT_NE(text.find("= matmul(%x, %0) : f32[4,16]@cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("= index_select(%1, %idx) {dim = 0} : f32[3,16]@cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("= index_add(%1, %idx, %2) {dim = 0} : f32[4,16]@cpu"), std::string::npos) << text;
  auto parsed = ir::parseGraph(text, "lib.kir");
  ir::verify(*parsed);
  EXPECT_EQ(ir::printGraph(*parsed), text);
}

}  // namespace
