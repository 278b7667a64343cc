// cross_entropy, nll_loss and mse_loss: gradcheck, compiled == eager, and
// errors (values and gradients against PyTorch's: functional_reference_test.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

TEST(Losses, Gradcheck) {
  Generator gen(7);
  const Tensor logits = randn({4, 3}, gen).to(DType::f64).setRequiresGrad();
  const Tensor target = fromVector<int64_t>({2, 0, -100, 1}, {4});
  const Tensor weight = fromVector(std::vector<double>{0.5, 1.0, 2.0}, {3}).setRequiresGrad();
  GradcheckResult r = gradcheck(
      [&](const std::vector<Tensor>& x) {
        CrossEntropyOptions o;
        o.weight = x[1];
        return crossEntropy(x[0], target, o);
      },
      {logits, weight});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck(
      [&](const std::vector<Tensor>& x) {
        CrossEntropyOptions o;
        o.reduction = Reduction::none;
        o.labelSmoothing = 0.2;
        return crossEntropy(x[0], target, o);
      },
      {logits});
  EXPECT_TRUE(r.ok) << r.message;
  const Tensor other = randn({4, 3}, gen).to(DType::f64).setRequiresGrad();
  r = gradcheck([](const std::vector<Tensor>& x) { return mseLoss(x[0], x[1]); }, {logits, other});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Losses, CompiledEqualsEager) {
  Generator gen(3);
  const Tensor logits = randn({16, 10}, gen);
  const Tensor target = fromVector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, {16});
  auto f = compile([](const Tensor& x, const Tensor& t) { return crossEntropy(x, t); });
  EXPECT_EQ(f(logits, target).toVector(), crossEntropy(logits, target).toVector());
}

TEST(Losses, Errors) {
  const Tensor x = zeros({2, 3});
  EXPECT_EQ(errorOf([&] { crossEntropy(x, fromVector<int64_t>({0, 3}, {2})); }),
            "nll_loss: target 3 at index 1 is out of bounds for 3 classes (input f32[2,3]@cpu)");
  EXPECT_EQ(errorOf([&] { nllLoss(x, fromVector<int64_t>({0, 1, 2}, {3})); }),
            "nll_loss: expected target of shape [2] for input f32[2,3]@cpu, got i64[3]@cpu");
  EXPECT_EQ(errorOf([&] { nllLoss(x, zeros({2})); }),
            "nll_loss: expected class indices of dtype i64 or i32 as target, got f32[2]@cpu");
  CrossEntropyOptions smoothing;
  smoothing.labelSmoothing = 1.5;
  EXPECT_EQ(errorOf([&] { crossEntropy(x, zeros({2, 3}), smoothing); }),
            "cross_entropy: label_smoothing must be in [0, 1], got 1.5");
  NllOptions badWeight;
  badWeight.weight = ones({2});
  EXPECT_EQ(errorOf([&] { nllLoss(x, fromVector<int64_t>({0, 1}, {2}), badWeight); }),
            "nll_loss: expected weight of shape [3] (one per class) for input f32[2,3]@cpu, got f32[2]@cpu");
}

}  // namespace
}  // namespace kiln
