// The rules of a fusion of reductions (ir/reduction_fusion.h): rows of a
// reduction, which broadcasts of a value per row land on its row, and the
// classification of a group's values. The verifier's messages for broken
// rules are tested in tests/lit/ir/reductions-verify.kir.
#include "ir/reduction_fusion.h"

#include <gtest/gtest.h>

#include "common/graph_builders.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;

ir::RowDomain rowsOf(ir::Shape shape, std::vector<int64_t> dims) {
  ir::Graph g;
  ir::Value* x = g.addInput(f32(std::move(shape)));
  ir::Node* n = g.create(Op::sum, std::vector<ir::Value*>{x}, {{"dims", std::move(dims)}});
  return ir::rowDomainOf(*n);
}

TEST(ReductionFusionRules, RowsAndResultShapes) {
  const ir::RowDomain r = rowsOf({4, 5, 6}, {1});
  EXPECT_EQ(r.keepShape, (ir::Shape{4, 1, 6}));
  EXPECT_EQ(r.dropShape, (ir::Shape{4, 6}));
  EXPECT_FALSE(r.degenerate());
  EXPECT_TRUE(rowsOf({4, 1}, {1}).degenerate());
  EXPECT_EQ(r.str(DType::f32), "dims [1] of f32[4,5,6]@cpu");
  // Every dim (dims []): one row, a scalar result.
  EXPECT_EQ(rowsOf({4, 5}, {}).dropShape, ir::Shape{});
}

TEST(ReductionFusionRules, AValuePerRowBroadcastsAlongTheReducedDimsOnly) {
  // Rows of dim 1 of [4, 4]: keepdim [4, 1] lands per row; [4] broadcasts
  // to [1, 4], along the rows: element (i, j) would read row j's value.
  const ir::RowDomain last = rowsOf({4, 4}, {1});
  EXPECT_TRUE(last.readsPerRow({4, 1}, {4, 4}));
  EXPECT_FALSE(last.readsPerRow({4}, {4, 4}));
  EXPECT_TRUE(last.readsPerRow({4}, {4}));
  // Rows of dim 0: [4] lands on dim 1, the kept one, so it is per row.
  const ir::RowDomain first = rowsOf({4, 4}, {0});
  EXPECT_TRUE(first.readsPerRow({4}, {4, 4}));
  EXPECT_TRUE(first.readsPerRow({1, 4}, {4, 4}));
  EXPECT_TRUE(first.readsPerRow({4}, {1, 4}));
  // Rows of dims [0, 2] of [2, 3, 5]: K [1, 3, 1], Q [3].
  const ir::RowDomain mid = rowsOf({2, 3, 5}, {0, 2});
  EXPECT_TRUE(mid.readsPerRow({1, 3, 1}, {2, 3, 5}));
  EXPECT_FALSE(mid.readsPerRow({3}, {2, 3, 5}));
  // A kept dim of size 1 may land anywhere.
  EXPECT_TRUE(rowsOf({1, 7}, {1}).readsPerRow({1}, {1, 7}));
}

TEST(ReductionFusionRules, ValuesAreRowsOrPerRow) {
  // softmax's body: x - amax(x) is a row value, the sums per row.
  ir::Graph g;
  ir::Value* x = g.addInput(f32({3, 8}));
  const ir::Attributes keep = {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t{1}}};
  ir::Value* m = g.create(Op::amax, std::vector<ir::Value*>{x}, keep)->output();
  ir::Value* e = un(g, Op::exp, bin(g, Op::sub, x, m));
  ir::Value* s = g.create(Op::sum, std::vector<ir::Value*>{e}, keep)->output();
  ir::Value* l = un(g, Op::log, s);
  ir::Value* y = bin(g, Op::div, e, s);
  g.setOutputs({y, l});
  ir::ReductionGroup group;
  group.inputs = {x};
  for (const ir::Node* n : g.nodes()) group.nodes.push_back(n);
  group.outputs = {y, l};
  ir::ReductionGroupInfo info;
  ASSERT_FALSE(ir::analyzeReductionGroup(group, &info));
  EXPECT_TRUE(info.isOuter(m));
  EXPECT_FALSE(info.isOuter(e));
  EXPECT_TRUE(info.isOuter(s));
  EXPECT_TRUE(info.isOuter(l));
  EXPECT_FALSE(info.isOuter(y));
  EXPECT_TRUE(info.isView.count(x));
}

}  // namespace
