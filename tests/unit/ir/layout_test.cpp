// Strided layouts (ir/layout.h): contiguous strides, contiguity, extents,
// the views reshape can make (PyTorch's computeStride), the layout of each
// view op's result, and the type rules of slice, expand and cat with their
// exact errors.
#include "ir/layout.h"

#include <gtest/gtest.h>

#include "common/error_of.h"
#include "ir/op_registry.h"

namespace {

using namespace kiln;
using namespace kiln::ir;

TensorType f32(Shape shape) { return {DType::f32, std::move(shape), Device::cpu()}; }

TEST(Layout, ContiguousStridesAndContiguity) {
  EXPECT_EQ(contiguousStrides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(contiguousStrides({}), Strides{});
  EXPECT_EQ(contiguousStrides({3, 0, 2}), (Strides{2, 2, 1})) << "a size-0 dimension counts as 1";
  EXPECT_TRUE(isContiguous({2, 3}, {3, 1}));
  EXPECT_FALSE(isContiguous({2, 3}, {1, 2}));
  EXPECT_TRUE(isContiguous({2, 1, 3}, {3, 99, 1})) << "size-1 strides do not matter";
  EXPECT_TRUE(isContiguous({0, 3}, {7, 5})) << "empty is contiguous";
  EXPECT_FALSE(isContiguous({2, 3}, {6, 2}));
  EXPECT_FALSE(isContiguous({2, 3}, {0, 1})) << "expanded";
}

TEST(Layout, Extent) {
  EXPECT_EQ(extent({2, 3}, {3, 1}), 6);
  EXPECT_EQ(extent({3, 2}, {1, 4}), 7);
  EXPECT_EQ(extent({5, 3}, {0, 1}), 3);
  EXPECT_EQ(extent({2, 0}, {1, 1}), 0);
  EXPECT_EQ(extent({}, {}), 1);
}

TEST(Layout, ViewStridesFollowPyTorch) {
  // Contiguous: any shape.
  EXPECT_EQ(viewStrides({4, 6}, {6, 1}, {2, 12}), (Strides{12, 1}));
  EXPECT_EQ(viewStrides({4, 6}, {6, 1}, {24}), (Strides{1}));
  // A transpose: splitting one dimension works, merging the two does not.
  EXPECT_EQ(viewStrides({6, 4}, {1, 6}, {2, 3, 4}), (Strides{3, 1, 6}));
  EXPECT_EQ(viewStrides({6, 4}, {1, 6}, {24}), std::nullopt);
  // Rows of a larger buffer: merging rows needs them adjacent.
  EXPECT_EQ(viewStrides({2, 6}, {12, 1}, {12}), std::nullopt);
  EXPECT_EQ(viewStrides({2, 6}, {12, 1}, {2, 2, 3}), (Strides{12, 3, 1}));
  // Size-1 dimensions come and go freely; expanded dimensions split but do not merge.
  EXPECT_EQ(viewStrides({4, 6}, {6, 1}, {4, 1, 6}), (Strides{6, 6, 1}));
  EXPECT_EQ(viewStrides({4, 6}, {0, 1}, {2, 2, 6}), (Strides{0, 0, 1}));
  EXPECT_EQ(viewStrides({4, 6}, {0, 1}, {24}), std::nullopt);
  // One element or none: contiguous strides.
  EXPECT_EQ(viewStrides({}, {}, {1, 1}), (Strides{1, 1}));
  EXPECT_EQ(viewStrides({0, 4}, {4, 1}, {2, 0}), (Strides{1, 1}));
}

TEST(Layout, MovedLayoutOfEachViewOp) {
  const Layout base{{6, 1}, 2};
  EXPECT_EQ(movedLayout(Op::transpose, {{"perm", std::vector<int64_t>{1, 0}}}, {4, 6}, base), (Layout{{1, 6}, 2}));
  EXPECT_EQ(
      movedLayout(Op::slice, {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{6}}, {"step", int64_t{2}}},
                  {4, 6}, base),
      (Layout{{6, 2}, 3}));
  EXPECT_EQ(movedLayout(Op::expand, {{"shape", std::vector<int64_t>{2, 4, 6}}}, {4, 6}, base), (Layout{{0, 6, 1}, 2}));
  EXPECT_EQ(movedLayout(Op::expand, {{"shape", std::vector<int64_t>{4, 5}}}, {4, 1}, {{1, 1}, 0}), (Layout{{1, 0}, 0}));
  EXPECT_EQ(movedLayout(Op::reshape, {{"shape", std::vector<int64_t>{24}}}, {4, 6}, base), (Layout{{1}, 2}));
  EXPECT_EQ(movedLayout(Op::reshape, {{"shape", std::vector<int64_t>{24}}}, {4, 6}, {{1, 4}, 0}), std::nullopt);
  EXPECT_TRUE(isViewOp(Op::expand));
  EXPECT_FALSE(isViewOp(Op::cat));
  EXPECT_FALSE(isViewOp(Op::add));
}

TEST(Layout, TypeRulesOfSliceExpandAndCat) {
  const TensorType x = f32({2, 6});
  auto slice = [&](int64_t dim, int64_t start, int64_t end, int64_t step) {
    const TensorType in[] = {x};
    return inferType(Op::slice, in, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
  };
  EXPECT_EQ(slice(1, 1, 6, 2), f32({2, 3}));
  EXPECT_EQ(slice(1, 1, 5, 2), f32({2, 2}));
  EXPECT_EQ(slice(0, 1, 1, 1), f32({0, 6}));
  EXPECT_EQ(errorOf([&] { slice(1, 4, 3, 1); }),
            "slice: expected 0 <= start <= end <= 6 and step >= 1, got start = 4, end = 3, step = 1 for dimension 1 "
            "of f32[2,6]@cpu");
  EXPECT_EQ(errorOf([&] { slice(1, 0, 6, 0); }),
            "slice: expected 0 <= start <= end <= 6 and step >= 1, got start = 0, end = 6, step = 0 for dimension 1 "
            "of f32[2,6]@cpu");
  EXPECT_EQ(errorOf([&] { slice(-1, 0, 1, 1); }), "slice: dim -1 out of range for f32[2,6]@cpu");

  auto expand = [&](const TensorType& t, Shape shape) {
    const TensorType in[] = {t};
    return inferType(Op::expand, in, {{"shape", shape}});
  };
  EXPECT_EQ(expand(f32({1, 6}), {3, 2, 6}), f32({3, 2, 6}));
  EXPECT_EQ(errorOf([&] { expand(x, {3, 6}); }), "expand: cannot expand f32[2,6]@cpu to [3,6]");
  EXPECT_EQ(errorOf([&] { expand(x, {6}); }), "expand: cannot expand f32[2,6]@cpu to [6]");
  EXPECT_EQ(errorOf([&] { expand(f32({1}), {-1}); }), "expand: cannot expand f32[1]@cpu to [-1]");

  auto cat = [&](std::vector<TensorType> in, int64_t dim) { return inferType(Op::cat, in, {{"dim", dim}}); };
  EXPECT_EQ(cat({x, f32({3, 6})}, 0), f32({5, 6}));
  EXPECT_EQ(cat({x}, 1), x);
  EXPECT_EQ(errorOf([&] { cat({}, 0); }), "cat: expected at least 1 input, got 0");
  EXPECT_EQ(errorOf([&] {
              cat({x, f32({2, 5})}, 0);
            }),
            "cat: expected equal sizes outside dimension 0, got f32[2,6]@cpu and f32[2,5]@cpu");
  EXPECT_EQ(errorOf([&] {
              cat({x, f32({12})}, 0);
            }),
            "cat: expected equal sizes outside dimension 0, got f32[2,6]@cpu and f32[12]@cpu");
  EXPECT_EQ(errorOf([&] { cat({x, x}, 2); }), "cat: dim 2 out of range for f32[2,6]@cpu");
  EXPECT_EQ(errorOf([&] {
              cat({x, {DType::i32, {2, 6}, Device::cpu()}}, 0);
            }),
            "cat: expected inputs of one dtype, got f32[2,6]@cpu and i32[2,6]@cpu");
  EXPECT_EQ(errorOf([&] { cat({x}, 0); }), "no error");
}

}  // namespace
