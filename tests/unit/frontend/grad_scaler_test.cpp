// amp::GradScaler (frontend/amp/grad_scaler.h) and nn::utils::clipGradNorm_
// (frontend/nn/clip_grad.h): PyTorch's defaults; an injected inf skips the
// step (the parameters do not move) and halves the scale; growthInterval
// clean steps double it; unscale_ divides the gradients before clipping and
// only once per update; a disabled scaler passes through; clipGradNorm_
// against a float64 computation for the 2-norm, another p and infinity,
// with the clamp at 1 and errorIfNonfinite.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

/// One parameter and an optimizer on it; the gradient is set by hand.
struct OneParameter {
  Tensor w = fromVector(std::vector<float>{1, 2, 3, 4}, {4}).setRequiresGrad();
  optim::SGD sgd{{w}, optim::SGDOptions{.lr = 0.1}};
  void grad(std::vector<float> g) { w.setGrad(fromVector(g, {4})); }
};

TEST(GradScaler, HasPyTorchsDefaults) {
  amp::GradScaler s;
  EXPECT_EQ(s.getScale(), 65536.0);
  EXPECT_EQ(s.scale(fromVector(std::vector<float>{0.5f}, {1})).toVector(), std::vector<float>{32768.0f});
}

TEST(GradScaler, AnInjectedInfSkipsTheStepAndHalvesTheScale) {
  OneParameter t;
  amp::GradScaler s({.initScale = 1024.0});
  t.grad({1024, 2048, std::numeric_limits<float>::infinity(), 0});
  EXPECT_FALSE(s.step(t.sgd));
  EXPECT_EQ(t.w.toVector(), (std::vector<float>{1, 2, 3, 4})) << "the step was taken";
  s.update();
  EXPECT_EQ(s.getScale(), 512.0);
  // A NaN too.
  t.grad({std::nanf(""), 0, 0, 0});
  EXPECT_FALSE(s.step(t.sgd));
  s.update();
  EXPECT_EQ(s.getScale(), 256.0);
  // A clean step: the gradient is divided by the scale, then SGD moves w.
  t.grad({256, 512, 0, -256});
  EXPECT_TRUE(s.step(t.sgd));
  EXPECT_EQ(t.w.toVector(), (std::vector<float>{0.9f, 1.8f, 3.0f, 4.1f}));
  s.update();
  EXPECT_EQ(s.getScale(), 256.0);
  EXPECT_EQ(s.growthTracker(), 1);
}

TEST(GradScaler, GrowthIntervalCleanStepsDoubleTheScale) {
  OneParameter t;
  amp::GradScaler s({.initScale = 8.0, .growthInterval = 3});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.getScale(), 8.0) << "grew early, at step " << i;
    t.grad({8, 8, 8, 8});
    EXPECT_TRUE(s.step(t.sgd));
    s.update();
  }
  EXPECT_EQ(s.getScale(), 16.0);
  EXPECT_EQ(s.growthTracker(), 0);
  // An inf restarts the count.
  t.grad({16, 16, 16, 16});
  s.step(t.sgd), s.update();
  t.grad({std::numeric_limits<float>::infinity(), 0, 0, 0});
  s.step(t.sgd), s.update();
  EXPECT_EQ(s.getScale(), 8.0);
  EXPECT_EQ(s.growthTracker(), 0);
}

TEST(GradScaler, UnscaleBeforeClippingOnceAndUpdateNeedsAStep) {
  OneParameter t;
  amp::GradScaler s({.initScale = 4.0});
  t.grad({12, 16, 0, 0});  // unscaled: {3, 4, 0, 0}, norm 5
  s.unscale_(t.sgd);
  EXPECT_EQ(t.w.grad().toVector(), (std::vector<float>{3, 4, 0, 0}));
  const Tensor norm = nn::utils::clipGradNorm_({t.w}, 1.0);
  EXPECT_FLOAT_EQ(norm.item(), 5.0f);
  EXPECT_NEAR(t.w.grad().toVector()[0], 0.6, 1e-6);
  EXPECT_NE(errorOf([&] { s.unscale_(t.sgd); }).find("unscale_() has already been called"), std::string::npos);
  EXPECT_TRUE(s.step(t.sgd));  // does not unscale again
  EXPECT_NEAR(t.w.toVector()[0], 1 - 0.1 * 0.6, 1e-6);
  s.update();
  EXPECT_NE(errorOf([&] { s.update(); }).find("no inf/NaN check was recorded"), std::string::npos);
  // Disabled: scale 1, no checks, always steps.
  amp::GradScaler off({.enabled = false});
  const Tensor loss = fromVector(std::vector<float>{2.0f}, {1});
  EXPECT_EQ(off.scale(loss).toVector(), loss.toVector());
  t.grad({std::numeric_limits<float>::infinity(), 0, 0, 0});
  EXPECT_TRUE(off.step(t.sgd));
  off.update();
  // State for checkpoints.
  amp::GradScaler restored;
  restored.loadStateDict(s.stateDict());
  EXPECT_EQ(restored.getScale(), s.getScale());
  EXPECT_EQ(restored.growthTracker(), s.growthTracker());
}

TEST(ClipGradNorm, MatchesAFloat64ComputationForEachNorm) {
  Generator gen(5);
  Tensor a = randn({3, 4}, gen).setRequiresGrad(), b = randn({5}, gen).setRequiresGrad();
  Tensor c = randn({2}, gen).setRequiresGrad();  // no gradient: skipped
  for (double p : {2.0, 1.5, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(p);
    Generator g(6);
    a.setGrad(randn({3, 4}, g) * 3.0), b.setGrad(randn({5}, g) * 3.0);
    const std::vector<float> ga = a.grad().toVector(), gb = b.grad().toVector();
    double want = 0;
    for (const auto* v : {&ga, &gb})
      for (float x : *v) want = std::isinf(p) ? std::max(want, std::abs(double(x))) : want + std::pow(std::abs(double(x)), p);
    if (!std::isinf(p)) want = std::pow(want, 1 / p);
    const double maxNorm = 1.0;
    const Tensor norm = nn::utils::clipGradNorm_({a, b, c}, maxNorm, p);
    EXPECT_NEAR(norm.item(), want, 1e-5 * want);
    const double coefficient = std::min(1.0, maxNorm / (want + 1e-6));
    EXPECT_NEAR(a.grad().toVector()[0], ga[0] * coefficient, 1e-6);
    EXPECT_NEAR(b.grad().toVector()[4], gb[4] * coefficient, 1e-6);
  }
  // Below maxNorm nothing changes (the coefficient is clamped at 1).
  a.setGrad(full({3, 4}, 0.01)), b.setGrad(full({5}, 0.01));
  nn::utils::clipGradNorm_({a, b}, 10.0);
  EXPECT_EQ(a.grad().toVector()[0], 0.01f);
  // A non-finite norm: an error with errorIfNonfinite, before any scaling.
  b.setGrad(fromVector(std::vector<float>{1, 2, 3, 4, std::numeric_limits<float>::infinity()}, {5}));
  const std::string e = errorOf([&] { nn::utils::clipGradNorm_({a, b}, 1.0, 2.0, true); });
  EXPECT_NE(e.find("the total norm of order 2 of the gradients is inf"), std::string::npos) << e;
  EXPECT_EQ(a.grad().toVector()[0], 0.01f);
}

}  // namespace
}  // namespace kiln
