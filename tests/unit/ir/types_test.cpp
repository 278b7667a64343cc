// Unit tests for IR tensor types: NumPy broadcasting of shapes (scalars,
// missing and unit dimensions, size-0 dimensions, incompatible shapes),
// numel, and the printed form dtype[shape]@device used by the printer and by
// every error message.
#include "ir/types.h"

#include <gtest/gtest.h>

#include <optional>

namespace kiln::ir {
namespace {

struct BroadcastCase {
  Shape a, b;
  std::optional<Shape> expected;
};

// Expected results follow the NumPy broadcasting rules: align from the right,
// a missing dimension is 1, and two dimensions agree when equal or one is 1.
const BroadcastCase kBroadcastCases[] = {
    {{}, {}, Shape{}},
    {{}, {2, 3}, Shape{2, 3}},
    {{7}, {}, Shape{7}},
    {{2, 3}, {2, 3}, Shape{2, 3}},
    {{2, 3}, {3}, Shape{2, 3}},
    {{2, 1}, {1, 3}, Shape{2, 3}},
    {{5, 4}, {1}, Shape{5, 4}},
    {{8, 1, 6, 1}, {7, 1, 5}, Shape{8, 7, 6, 5}},  // the NumPy manual's example
    {{15, 3, 5}, {15, 1, 5}, Shape{15, 3, 5}},
    {{15, 3, 5}, {3, 1}, Shape{15, 3, 5}},
    {{1, 1, 1}, {4}, Shape{1, 1, 4}},
    // Size-0 dimensions broadcast like any other size: against 1 or themselves.
    {{0}, {1}, Shape{0}},
    {{0}, {0}, Shape{0}},
    {{0}, {}, Shape{0}},
    {{2, 0}, {2, 1}, Shape{2, 0}},
    {{1, 0}, {5, 1}, Shape{5, 0}},
    {{0, 3}, {3}, Shape{0, 3}},
    // Incompatible.
    {{3}, {4}, std::nullopt},
    {{2, 3}, {4}, std::nullopt},
    {{2, 1}, {8, 4, 3}, std::nullopt},  // NumPy manual: second-from-last 2 vs 4
    {{0}, {3}, std::nullopt},
    {{2, 0}, {2, 2}, std::nullopt},
};

TEST(BroadcastShapes, FollowsNumPyRules) {
  for (const BroadcastCase& c : kBroadcastCases) {
    SCOPED_TRACE(shapeStr(c.a) + " with " + shapeStr(c.b));
    EXPECT_EQ(broadcastShapes(c.a, c.b), c.expected);
  }
}

TEST(BroadcastShapes, IsSymmetric) {
  for (const BroadcastCase& c : kBroadcastCases) {
    SCOPED_TRACE(shapeStr(c.a) + " with " + shapeStr(c.b));
    EXPECT_EQ(broadcastShapes(c.b, c.a), c.expected);
  }
}

TEST(Numel, ProductOfDimensions) {
  EXPECT_EQ(numel({}), 1) << "a scalar has one element";
  EXPECT_EQ(numel({8192, 1024}), 8388608);
  EXPECT_EQ(numel({2, 0, 3}), 0);
  TensorType t{DType::f32, {4, 5, 6}, Device::cpu()};
  EXPECT_EQ(t.numel(), 120);
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(TensorType{}.rank(), 0);
}

TEST(TensorType, Str) {
  EXPECT_EQ((TensorType{DType::f32, {8192, 1024}, Device::cpu()}.str()), "f32[8192,1024]@cpu");
  EXPECT_EQ((TensorType{DType::f32, {}, Device::cpu()}.str()), "f32[]@cpu");
  EXPECT_EQ((TensorType{DType::bf16, {3}, Device::cuda(1)}.str()), "bf16[3]@cuda:1");
  EXPECT_EQ((TensorType{DType::boolean, {2, 0}, Device::cpu()}.str()), "bool[2,0]@cpu");
  EXPECT_EQ((TensorType{DType::i64, {}, Device::cuda(0)}.str()), "i64[]@cuda:0");
  EXPECT_EQ(shapeStr({8192, 1024}), "[8192,1024]");
  EXPECT_EQ(shapeStr({}), "[]");
}

TEST(TensorType, EqualityComparesDTypeShapeAndDevice) {
  const TensorType t{DType::f32, {2, 3}, Device::cpu()};
  EXPECT_EQ(t, (TensorType{DType::f32, {2, 3}, Device::cpu()}));
  EXPECT_NE(t, (TensorType{DType::f64, {2, 3}, Device::cpu()}));
  EXPECT_NE(t, (TensorType{DType::f32, {3, 2}, Device::cpu()}));
  EXPECT_NE(t, (TensorType{DType::f32, {2, 3}, Device::cuda(0)}));
}

}  // namespace
}  // namespace kiln::ir
