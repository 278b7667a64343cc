// Reductions of views read the view where it is (its strides and offset):
// one kernel, no hidden copy, the same values as the reduction of the view
// made contiguous; and compiled equals eager on them.
#include <gtest/gtest.h>

#include <functional>

#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

void expectLikeContiguous(const char* what, const Tensor& view, const std::function<Tensor(const Tensor&)>& f) {
  const Tensor want = f(view.contiguous());
  const int64_t before = runtime::kernelLaunchCount();
  const Tensor got = f(view);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1) << what << ": one kernel, no copy";
  ASSERT_EQ(got.type(), want.type()) << what;
  if (got.dtype() == DType::i64)
    EXPECT_EQ(got.toVector<int64_t>(), want.toVector<int64_t>()) << what;
  else
    EXPECT_EQ(got.toVector(), want.toVector()) << what;
}

TEST(ReductionViews, ViewsAreReadThroughTheirStrides) {
  // Small integers: every sum is exact, whatever the order.
  const Tensor cube = ((arange(0, 6 * 40 * 7) * 7.0) - 700.0).view({6, 40, 7});
  expectLikeContiguous("sum of a transpose", cube.transpose(0, 2), [](const Tensor& t) { return kiln::sum(t, {1}); });
  expectLikeContiguous("amax over a permuted dim", cube.permute({2, 0, 1}),
                       [](const Tensor& t) { return amax(t, {-1}); });
  expectLikeContiguous("argmax of a slice", cube.narrow(1, 3, 20), [](const Tensor& t) { return argmax(t, 1); });
  expectLikeContiguous("mean of a select", cube.select(2, 4), [](const Tensor& t) { return kiln::mean(t, {0}, true); });
  expectLikeContiguous("sum of an expand", cube.select(1, 0).unsqueeze(1).expand({6, 9, 7}), [](const Tensor& t) {
    return kiln::sum(t, {1, 2});
  });
}

TEST(ReductionViews, CompiledEqualsEagerOnATransposedInput) {
  Generator gen(2);
  Tensor x = randn({64, 96}, gen).t();
  auto f = compile([](const Tensor& t) { return std::vector<Tensor>{kiln::var(t, {1}), argmax(t, 0)}; });
  auto out = f(x);
  EXPECT_EQ(out[0].toVector(), kiln::var(x, {1}).toVector());
  EXPECT_EQ(out[1].toVector<int64_t>(), argmax(x, 0).toVector<int64_t>());
}

}  // namespace
