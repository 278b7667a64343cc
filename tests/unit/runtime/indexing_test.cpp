// The index_select and index_add library calls (runtime/indexing.h) on
// hand-made buffers: x read through strides, the index through its stride
// (i32 and i64), repeated indices accumulating in index order (f16 rounded
// after each addition, integers wrapping), and an out-of-range index
// reported before anything is written.
#include "runtime/indexing.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::runtime {
namespace {

TEST(IndexSelect, GathersSlicesOfAStridedTensorAlongADim) {
  // x is the transpose of a contiguous [4, 3] storage: x[i, j] = storage[j * 3 + i], x is [3, 4].
  std::vector<float> storage(12);
  std::iota(storage.begin(), storage.end(), 0.0f);
  const int32_t index[] = {3, -1, 0, -1, 3};  // stride 2: 3, 0, 3
  IndexCall c;
  c.dtype = DType::f32;
  c.indexDType = DType::i32;
  c.dim = 1;
  c.sizes = {3, 4};
  c.strides = {1, 3};
  c.numIndices = 3;
  c.indexStride = 2;
  std::vector<float> out(9, -7.0f);
  std::vector<void*> buffers = {storage.data(), const_cast<int32_t*>(index), out.data()};
  indexSelect(buffers, c.encode());
  // out[i, j] = x[i, index[j]] = storage[index[j] * 3 + i]
  EXPECT_EQ(out, (std::vector<float>{9, 0, 9, 10, 1, 10, 11, 2, 11}));
}

TEST(IndexSelect, AnIndexOutOfRangeIsAnErrorBeforeAnythingIsWritten) {
  const std::vector<double> x = {1, 2, 3, 4};
  for (int64_t bad : {int64_t{4}, int64_t{-1}}) {
    const int64_t index[] = {0, bad, 1};
    IndexCall c;
    c.dtype = DType::f64;
    c.indexDType = DType::i64;
    c.sizes = {4};
    c.strides = {1};
    c.numIndices = 3;
    std::vector<double> out(3, -7.0);
    std::vector<void*> buffers = {const_cast<double*>(x.data()), const_cast<int64_t*>(index), out.data()};
    try {
      indexSelect(buffers, c.encode());
      FAIL() << "expected a kiln::Error for index " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("index_select: index {} is out of range for dimension 0 of size 4", bad));
    }
    EXPECT_EQ(out, std::vector<double>(3, -7.0)) << "nothing written";
  }
}

TEST(IndexAdd, RepeatedIndicesAccumulateInIndexOrder) {
  // x [3, 2] = 0; source [4, 2] rows 1, 2, 3, 4 (times 10 in column 1) at rows 2, 0, 2, 2.
  const std::vector<float> x(6, 0.0f);
  const std::vector<float> source = {1, 10, 2, 20, 3, 30, 4, 40};
  const int64_t index[] = {2, 0, 2, 2};
  IndexCall c;
  c.dtype = DType::f32;
  c.indexDType = DType::i64;
  c.sizes = {3, 2};
  c.strides = {2, 1};
  c.numIndices = 4;
  c.sourceStrides = {2, 1};
  std::vector<float> out(6, -7.0f);
  std::vector<void*> buffers = {const_cast<float*>(x.data()), const_cast<int64_t*>(index),
                                const_cast<float*>(source.data()), out.data()};
  indexAdd(buffers, c.encode());
  EXPECT_EQ(out, (std::vector<float>{2, 20, 0, 0, 8, 80}));
}

TEST(IndexAdd, F16RoundsAfterEveryAdditionAndIntegersWrap) {
  // f16: 2048 + 1 + 1 rounds to 2048 at each step (the spacing is 2 there),
  // where one f32 sum and one rounding would give 2050.
  const Half x[] = {Half(2048.0f)};
  const Half source[] = {Half(1.0f), Half(1.0f)};
  const int64_t index[] = {0, 0};
  IndexCall c;
  c.dtype = DType::f16;
  c.indexDType = DType::i64;
  c.sizes = {1};
  c.strides = {1};
  c.numIndices = 2;
  c.sourceStrides = {1};
  Half out[1];
  std::vector<void*> buffers = {const_cast<Half*>(x), const_cast<int64_t*>(index), const_cast<Half*>(source), out};
  indexAdd(buffers, c.encode());
  EXPECT_EQ(static_cast<float>(out[0]), 2048.0f);

  const int32_t xi[] = {2147483647};
  const int32_t si[] = {1};
  const int64_t one[] = {0};
  c.dtype = DType::i32;
  c.numIndices = 1;
  int32_t outi[1];
  std::vector<void*> ib = {const_cast<int32_t*>(xi), const_cast<int64_t*>(one), const_cast<int32_t*>(si), outi};
  indexAdd(ib, c.encode());
  EXPECT_EQ(outi[0], -2147483647 - 1);
}

TEST(IndexAdd, ReadsStridedXAndSourceAndIsTheSameOverThreads) {
  // x [2, 50000] (wide enough to split over threads), source its transpose's
  // storage read back as [2, 3, ...]: every element checked against a loop.
  const int64_t cols = 50000, n = 3;
  std::vector<float> x(2 * cols), source(2 * n * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<float>(i % 11) * 0.5f;
  const int64_t index[] = {1, 1, 0};
  IndexCall c;
  c.dtype = DType::f32;
  c.indexDType = DType::i64;
  c.dim = 1;
  c.sizes = {cols, 2};  // x viewed transposed: [cols, 2] with strides [1, cols]
  c.strides = {1, cols};
  c.numIndices = n;
  c.sourceStrides = {n, 1};  // source [cols, 3] contiguous
  std::vector<float> out(2 * cols);
  std::vector<void*> buffers = {x.data(), const_cast<int64_t*>(index), source.data(), out.data()};
  indexAdd(buffers, c.encode());
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      float want = x[static_cast<size_t>(j * cols + i)];
      for (int64_t k = 0; k < n; ++k)
        if (index[k] == j) want += source[static_cast<size_t>(i * n + k)];
      ASSERT_EQ(out[static_cast<size_t>(i * 2 + j)], want) << i << ", " << j;
    }
}

}  // namespace
}  // namespace kiln::runtime
