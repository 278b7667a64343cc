// kiln::max(x, dim) against PyTorch: its values, its indices (the first
// maximum, or the first NaN) and its gradient, which goes whole to the index
// max returns, as PyTorch's value_selecting_reduction_backward, eagerly and
// under kiln::compile (compiled == eager, bit for bit); amax's gradient
// still splits over the ties, as PyTorch's amax does.
//
// The expected numbers were made with PyTorch 2.15.0 (CPU):
//   x = torch.tensor(X, requires_grad=True); v, i = torch.max(x, dim, keepdim)
//   v.backward(G)   # G: the rows of kG below, shaped like v
// and are in each test as PyTorch printed them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "frontend/kiln.h"

namespace {

using namespace kiln;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Ties in rows 0 (3, 3) and 2 (all 2), NaNs in rows 1 and 3 (the first NaN
// wins), and a column of ties with a NaN (column 2).
const std::vector<float> kX = {1, 3, 3, 2, kNaN, 5, kNaN, 1, 2, 2, 2, 2, -1, 7, kNaN, 7};
const std::vector<float> kG = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/// Equal values, NaN equal to NaN.
void expectSameValues(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
        << "element " << i << ": " << got[i] << ", want " << want[i];
}

struct Case {
  int64_t dim;
  bool keepdim;
  std::vector<float> upstream;  // kG's first row (dim 0) or column (dim 1)
  std::vector<float> values;
  std::vector<int64_t> indices;
  std::vector<float> grad;
};

const Case kCases[] = {
    {0, false, {1, 2, 3, 4}, {kNaN, 7, kNaN, 7}, {1, 3, 1, 3}, {0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 2, 0, 4}},
    {0, true, {1, 2, 3, 4}, {kNaN, 7, kNaN, 7}, {1, 3, 1, 3}, {0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 2, 0, 4}},
    {1, false, {1, 2, 3, 4}, {3, kNaN, 2, kNaN}, {1, 0, 0, 2}, {0, 1, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 4, 0}},
    {1, true, {1, 5, 9, 13}, {3, kNaN, 2, kNaN}, {1, 0, 0, 2}, {0, 1, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 13, 0}},
    {-1, false, {1, 2, 3, 4}, {3, kNaN, 2, kNaN}, {1, 0, 0, 2}, {0, 1, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 4, 0}},
};

Shape reducedShape(const Case& c) {
  if (c.keepdim) return c.dim == 0 ? Shape{1, 4} : Shape{4, 1};
  return {4};
}

TEST(MaxGradient, GoesToTheIndexMaxReturnsAsPyTorch) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << "dim " << c.dim << " keepdim " << c.keepdim);
    Tensor x = fromVector(kX, {4, 4}).setRequiresGrad();
    auto [values, indices] = kiln::max(x, c.dim, c.keepdim);
    EXPECT_EQ(values.shape(), reducedShape(c));
    expectSameValues(values.toVector(), c.values);
    EXPECT_EQ(indices.toVector<int64_t>(), c.indices);
    values.backward(fromVector(c.upstream, reducedShape(c)));
    EXPECT_EQ(x.grad().toVector(), c.grad);
  }
}

TEST(MaxGradient, ThreeDimsAndZeroDims) {
  // torch.max(y, 1) of a [2,3,2] tensor with ties along dim 1, upstream [[1,2],[3,4]].
  Tensor y = fromVector({1, 1, 1, 0, 0, 1, 2, 3, 2, 3, 1, 3}, {2, 3, 2}).setRequiresGrad();
  auto [v, i] = kiln::max(y, 1);
  EXPECT_EQ(v.toVector(), (std::vector<float>{1, 1, 2, 3}));
  EXPECT_EQ(i.toVector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
  v.backward(fromVector({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(y.grad().toVector(), (std::vector<float>{1, 2, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0}));
  // torch.max(torch.tensor(3.), 0): (3, 0), gradient 1.
  Tensor s = full({}, 3.0).setRequiresGrad();
  auto [sv, si] = kiln::max(s, 0);
  EXPECT_EQ(si.item<int64_t>(), 0);
  sv.backward();
  EXPECT_EQ(s.grad().item(), 1.0f);
}

TEST(MaxGradient, EachRowsGradientIsAtItsArgmax) {
  // Many ties (values 0, 1, 2): the gradient of max(x, 1) for an upstream
  // of ones is one-hot at argmax(x, 1) in every row, and sums to 1 per row.
  std::vector<float> values(9 * 13);
  for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>((k * 7 + k / 5) % 3);
  values[3 * 13 + 4] = kNaN;  // a NaN row: its first NaN takes it all
  values[3 * 13 + 9] = kNaN;
  Tensor x = fromVector(values, {9, 13}).setRequiresGrad();
  auto [v, i] = kiln::max(x, 1);
  v.backward(ones({9}));
  const std::vector<int64_t> at = argmax(x, 1).toVector<int64_t>();
  EXPECT_EQ(i.toVector<int64_t>(), at);
  EXPECT_EQ(at[3], 4);
  const std::vector<float> grad = x.grad().toVector();
  for (int64_t r = 0; r < 9; ++r)
    for (int64_t c = 0; c < 13; ++c)
      EXPECT_EQ(grad[r * 13 + c], c == at[r] ? 1.0f : 0.0f) << "row " << r << " column " << c;
}

TEST(MaxGradient, AmaxStillSplitsOverTiesAsPyTorch) {
  // torch.amax(x, 1).backward(torch.ones(4)) on kX: each tied element gets
  // its share; a row whose result is NaN has no element equal to it and
  // gets NaN (0 / 0 counts), in PyTorch and in kiln.
  Tensor x = fromVector(kX, {4, 4}).setRequiresGrad();
  amax(x, {1}).backward(ones({4}));
  expectSameValues(x.grad().toVector(),
                   {0, 0.5, 0.5, 0, kNaN, kNaN, kNaN, kNaN, 0.25, 0.25, 0.25, 0.25, kNaN, kNaN, kNaN, kNaN});
}

std::vector<uint32_t> bitsOf(const Tensor& t) {
  std::vector<uint32_t> bits;
  for (float f : t.to(DType::f32).toVector()) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

TEST(MaxGradient, CompiledEqualsEager) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << "dim " << c.dim << " keepdim " << c.keepdim);
    auto step = [&c](const Tensor& input, const Tensor& upstream) {
      Tensor x = input.detach().setRequiresGrad();
      auto [values, indices] = kiln::max(x, c.dim, c.keepdim);
      values.backward(upstream);
      return std::vector<Tensor>{values, indices, x.grad()};
    };
    const Tensor x = fromVector(kX, {4, 4}), g = fromVector(c.upstream, reducedShape(c));
    const std::vector<Tensor> eager = step(x, g);
    auto compiled = compile(step);
    const std::vector<Tensor> out = compiled(x, g);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(bitsOf(out[0]), bitsOf(eager[0]));
    EXPECT_EQ(out[1].toVector<int64_t>(), eager[1].toVector<int64_t>());
    EXPECT_EQ(bitsOf(out[2]), bitsOf(eager[2]));
    EXPECT_EQ(out[2].toVector(), c.grad) << "PyTorch's gradient, compiled";
  }
}

}  // namespace
