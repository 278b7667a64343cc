// Views under kiln::compile: traced views become movement ops that kernels
// read through (compiled == eager bit for bit, with the kernel counts that
// say no copy was made), lone movement ops and non-viewable reshapes become
// copy kernels, cat and stack copy each input once, and arguments that are
// views are bound where they start (contiguous) or copied once on entry.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

Tensor iota(const Shape& shape) { return arange(0, static_cast<double>(ir::numel(shape))).view(shape); }

/// Whether two f32 tensors hold the same bits, element by element.
::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const auto x = a.toVector(), y = b.toVector();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

struct Case {
  const char* what;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  int kernels;  ///< kernels the compiled program launches
};

TEST(CompileViews, CompiledEqualsEagerBitForBitWithViewsInside) {
  Tensor x = randn({12, 16});
  Tensor y = randn({16, 12});
  // clang-format off
  const Case cases[] = {
      {"transpose feeding an op", [](const Tensor& a, const Tensor& b) { return kiln::sigmoid(a.t() * b); }, 1},
      {"slice with a step and an offset",
       [](const Tensor& a, const Tensor& b) { return kiln::tanh(a.slice(1, 3, 16, 2) + b.t().narrow(1, 1, 7)); }, 1},
      {"select and expand",
       [](const Tensor& a, const Tensor& b) { return a * a.select(0, 4).unsqueeze(0).expand({12, 16}); }, 1},
      {"permute of a reshape", [](const Tensor& a, const Tensor&) { return kiln::exp(a.view({3, 4, 16}).permute({2, 0, 1})); }, 1},
      {"squeeze and flatten",
       [](const Tensor& a, const Tensor& b) { return (a.unsqueeze(0).squeeze(0).flatten() - b.flatten()) * 0.5; }, 1},
      {"x + x.t() reads one input twice", [](const Tensor& a, const Tensor&) {
         Tensor s = a.narrow(1, 0, 12);
         return s + s.t();
       }, 1},
      {"a chain of views", [](const Tensor& a, const Tensor&) { return relu(a.t().slice(0, 2, 10).t().select(1, 3)); }, 1},
      {"a reshape the strides cannot view is cut: one copy",
       [](const Tensor& a, const Tensor&) { return kiln::sqrt(kiln::exp(a.t().reshape({192}))); }, 2},
      {"a view of an op's result",
       [](const Tensor& a, const Tensor& b) { return relu(a * 2.0).t() + b; }, 2},
      {"a lone transpose returned is one copy", [](const Tensor& a, const Tensor&) { return a.t(); }, 1},
      {"contiguous and clone trace to nothing",
       [](const Tensor& a, const Tensor&) { return relu(a.t().contiguous().clone()); }, 1},
      {"cat of views", [](const Tensor& a, const Tensor& b) { return cat({a.t(), b, a.t().slice(1, 0, 5)}, 1); }, 3},
      {"cat read by an op", [](const Tensor& a, const Tensor& b) { return relu(cat({a, b.t()}, 0)); }, 3},
      {"stack", [](const Tensor& a, const Tensor& b) { return kiln::stack({a, b.t(), a}, 1); }, 3},
  };
  // clang-format on
  for (const Case& c : cases) {
    auto f = compile(c.fn);
    const Tensor want = c.fn(x, y);
    const int64_t before = runtime::kernelLaunchCount();
    const Tensor got = f(x, y);
    EXPECT_EQ(runtime::kernelLaunchCount() - before, c.kernels) << c.what << "\n" << f.lastGraph();
    EXPECT_EQ(f.lastNumKernels(), c.kernels) << c.what;
    EXPECT_TRUE(sameBits(got, want)) << c.what << "\n" << f.lastGraph();
    EXPECT_TRUE(got.isContiguous()) << c.what;
  }
}

TEST(CompileViews, TheTransposeIsReadInsideTheFusion) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return relu(a.t() + b); });
  f(randn({4, 8}), randn({8, 4}));
  const std::string g = f.lastGraph();
  EXPECT_EQ(f.lastNumKernels(), 1);
  // The transpose sits in the fusion body, reading the block argument.
  const size_t fusion = g.find("fusion(");
  const size_t transpose = g.find("transpose(");
  ASSERT_NE(fusion, std::string::npos) << g;
  ASSERT_NE(transpose, std::string::npos) << g;
  EXPECT_LT(fusion, transpose) << g;
}

TEST(CompileViews, TracedViewsHaveTheirEagerStridesAndErrors) {
  Tensor seen;
  auto f = compile([&](const Tensor& a) {
    seen = a.t().slice(0, 1, 4);
    EXPECT_EQ(seen.strides(), (ir::Strides{1, 6}));
    EXPECT_EQ(seen.storageOffset(), 1);
    EXPECT_FALSE(seen.isContiguous());
    EXPECT_TRUE(seen.contiguous().isContiguous());
    return seen.reshape({-1});
  });
  EXPECT_EQ(f(iota({4, 6})).toVector(), iota({4, 6}).t().slice(0, 1, 4).reshape({-1}).toVector());
  auto g = compile([](const Tensor& a) { return a.t().view({24}); });
  EXPECT_EQ(errorOf([&] {
              g(zeros({4, 6}));
            }),
            "view: cannot view f32[6,4]@cpu with strides [1,6] as [24]: use reshape");
}

TEST(CompileViews, ViewArgumentsAreBoundWhereTheyStartOrCopiedOnce) {
  auto f = compile([](const Tensor& a) { return a * 2.0; });
  Tensor x = randn({6, 8});
  // A contiguous view (an offset): no copy.
  Tensor row = x.select(0, 3);
  const Tensor wantRow = row * 2.0;
  int64_t before = runtime::kernelLaunchCount();
  const Tensor gotRow = f(row);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1);
  EXPECT_TRUE(sameBits(gotRow, wantRow));
  // A transposed argument: one copy on entry, then the program.
  Tensor t = x.t();
  const Tensor wantT = t * 2.0;
  before = runtime::kernelLaunchCount();
  const Tensor gotT = f(t);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 2);
  EXPECT_TRUE(sameBits(gotT, wantT));
  EXPECT_EQ(f.numCompiles(), 2) << "[8] and [8,6]; strides are not part of the key";
  EXPECT_TRUE(sameBits(f(x.t().contiguous()), t * 2.0));
  EXPECT_EQ(f.numCompiles(), 2) << "a contiguous [8,6] reuses the program";
  // A captured view, read at every call through a copy of its current values.
  Tensor w = randn({8, 6});
  auto g = compile([&](const Tensor& a) { return a + w.t(); });
  EXPECT_TRUE(sameBits(g(x), x + w.t()));
}

TEST(CompileViews, AnArgumentReturnedIsThatTensor) {
  auto f = compile([](const Tensor& a, const Tensor& b) { return std::vector<Tensor>{a, relu(b)}; });
  Tensor x = randn({3, 4});
  Tensor slice = x.narrow(0, 1, 2);
  auto out = f(slice, x);
  EXPECT_EQ(out[0].impl()->storage, x.impl()->storage);
  EXPECT_EQ(out[0].storageOffset(), 4);
  EXPECT_EQ(out[0].toVector(), slice.toVector());
}

}  // namespace
