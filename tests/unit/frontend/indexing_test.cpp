// kiln::indexSelect, kiln::indexAdd and kiln::embedding: values against
// loops written here, views as operands, i32 and i64 indices, every dtype
// for the gather, repeated indices accumulating, the error for each
// mistake (an index out of range names the index and the size, and leaves
// no result), and compiled == eager bit for bit.
#include <gtest/gtest.h>

#include <bit>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace {

using namespace kiln;

Tensor iota(const Shape& shape) { return arange(0, static_cast<double>(ir::numel(shape))).view(shape); }
Tensor longs(std::vector<int64_t> v) { return fromVector(v); }

TEST(IndexSelect, GathersAlongAnyDimWithRepeats) {
  Tensor x = iota({3, 4});  // x[i, j] = 4 i + j
  EXPECT_EQ(indexSelect(x, 0, longs({2, 0, 2})).toVector(),
            (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(indexSelect(x, -1, fromVector(std::vector<int32_t>{3, 1})).toVector(),
            (std::vector<float>{3, 1, 7, 5, 11, 9}));
  EXPECT_EQ(indexSelect(x.t(), 1, longs({1})).toVector(), (std::vector<float>{4, 5, 6, 7})) << "a transposed x";
  EXPECT_EQ(indexSelect(x, 0, longs({0, 9, 1, 9}).slice(0, 0, 4, 2)).toVector(),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}))
      << "a strided index";
  EXPECT_EQ(indexSelect(x, 1, longs({})).shape(), (Shape{3, 0}));
  for (DType d : {DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
    EXPECT_EQ(indexSelect(x.to(d), 1, longs({2})).to(DType::f32).toVector(), (std::vector<float>{2, 6, 10}))
        << dtypeName(d);
  EXPECT_EQ(indexSelect(x.to(DType::boolean), 1, longs({0})).toVector<bool>(), (std::vector<bool>{false, true, true}));
}

TEST(IndexSelect, Errors) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(errorOf([&] {
              indexSelect(x, 0, longs({0, 3}));
            }),
            "index_select: index 3 is out of range for dimension 0 of size 3");
  EXPECT_EQ(errorOf([&] { indexSelect(x, 1, longs({-1})); }),
            "index_select: index -1 is out of range for dimension 1 of size 4");
  EXPECT_EQ(errorOf([&] { indexSelect(x, 2, longs({0})); }),
            "index_select: dim 2 is out of range for f32[3,4]@cpu (expected a dim in [-2, 1])");
  EXPECT_EQ(errorOf([&] { indexSelect(x, 0, zeros({2})); }),
            "index_select: expected an index of dtype i64 or i32, got f32[2]@cpu");
  EXPECT_EQ(errorOf([&] {
              indexSelect(x, 0, longs({0, 1}).view({1, 2}));
            }),
            "index_select: expected a 1-d index, got i64[1,2]@cpu");
}

TEST(IndexAdd, AccumulatesRepeatedIndices) {
  Tensor x = ones({3, 2});
  Tensor source = iota({4, 2});  // rows [0 1], [2 3], [4 5], [6 7]
  EXPECT_EQ(indexAdd(x, 0, longs({2, 0, 2, 2}), source).toVector(), (std::vector<float>{3, 4, 1, 1, 11, 14}));
  EXPECT_EQ(indexAdd(x.t(), 1, fromVector(std::vector<int32_t>{1, 1}), iota({2, 2}).t()).toVector(),
            (std::vector<float>{1, 3, 1, 1, 5, 1}))
      << "views as x and source";
  EXPECT_EQ(indexAdd(x.to(DType::i64), 0, longs({1}), iota({1, 2}).to(DType::i64)).toVector<int64_t>(),
            (std::vector<int64_t>{1, 1, 1, 2, 1, 1}));
  EXPECT_EQ(errorOf([&] {
              indexAdd(x, 0, longs({5}), iota({1, 2}));
            }),
            "index_add: index 5 is out of range for dimension 0 of size 3");
  EXPECT_EQ(errorOf([&] {
              indexAdd(x, 0, longs({1}), iota({2, 2}));
            }),
            "index_add: expected a source of shape [1,2] (x's, with the index's length 1 at dim 0), got f32[3,2]@cpu, "
            "i64[1]@cpu and f32[2,2]@cpu");
  EXPECT_EQ(errorOf([&] {
              indexAdd(x, 0, longs({1}), iota({1, 2}).to(DType::f64));
            }),
            "index_add: expected a source of the dtype of x, got f32[3,2]@cpu, i64[1]@cpu and f64[1,2]@cpu");
}

TEST(Embedding, RowsOfTheWeightInTheIndicesShape) {
  Tensor w = iota({5, 3});
  Tensor e = embedding(w, longs({4, 0, 1, 4}).view({2, 2}));
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(e.toVector(), (std::vector<float>{12, 13, 14, 0, 1, 2, 3, 4, 5, 12, 13, 14}));
  EXPECT_EQ(embedding(w, fromVector(std::vector<int32_t>{2}, Shape{})).toVector(), (std::vector<float>{6, 7, 8}))
      << "0-d indices give one row";
  EXPECT_EQ(errorOf([&] { embedding(w, longs({5})); }),
            "index_select: index 5 is out of range for dimension 0 of size 5");
  EXPECT_EQ(errorOf([&] { embedding(w.flatten(), longs({1})); }),
            "embedding: expected a 2-d weight [num, dim], got f32[15]@cpu");
  EXPECT_EQ(errorOf([&] { embedding(w, zeros({1})); }),
            "embedding: expected indices of dtype i64 or i32, got f32[1]@cpu");
}

::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b) {
  if (a.type() != b.type()) return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const auto x = a.toVector(), y = b.toVector();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

TEST(Embedding, CompiledEqualsEagerAndAnIndexOutOfRangeFailsTheCall) {
  Tensor w = randn({50, 16});
  Tensor idx = longs({3, 49, 3, 0, 7, 7}).view({2, 3});
  // forward and the backward's scatter-add of a gradient g
  auto f = [](const Tensor& w, const Tensor& idx, const Tensor& g) {
    Tensor e = embedding(w, idx) * 2.0;
    Tensor grad = indexAdd(zeros({50, 16}), 0, idx.reshape({-1}), g.reshape({6, 16}));
    return std::vector<Tensor>{e, grad};
  };
  Tensor g = randn({2, 3, 16});
  auto c = compile(f);
  const auto eager = f(w, idx, g), compiled = c(w, idx, g);
  EXPECT_TRUE(sameBits(compiled[0], eager[0]));
  EXPECT_TRUE(sameBits(compiled[1], eager[1]));
  Tensor bad = longs({3, 50, 3, 0, 7, 7}).view({2, 3});
  EXPECT_EQ(errorOf([&] { c(w, bad, g); }), "index_select: index 50 is out of range for dimension 0 of size 50");
}

}  // namespace
