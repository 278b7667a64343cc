// optim: parameter groups and their errors, zeroGrad, skipped parameters,
// SGD and Adam in f64 against their update equations computed here in
// double, and the learning-rate schedules against their closed forms.
// (tests/unit/frontend/optim_reference_test.cpp compares with PyTorch.)
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

Tensor param(std::vector<double> v) { return fromVector(v, {static_cast<int64_t>(v.size())}).setRequiresGrad(); }
Tensor grad(std::vector<double> v) { return fromVector(v, {static_cast<int64_t>(v.size())}); }

TEST(Optim, GroupsTakeTheOptimizersDefaultsWhereUnset) {
  Tensor a = param({1}), b = param({2}), c = param({3});
  optim::SGD opt({{.params = {a}}, {.params = {b}, .lr = 0.5}, {.params = {c}, .weightDecay = 0.25}},
                 {.lr = 0.1, .weightDecay = 0.01});
  const auto& g = opt.paramGroups();
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(*g[0].lr, 0.1);
  EXPECT_EQ(*g[0].weightDecay, 0.01);
  EXPECT_EQ(*g[1].lr, 0.5);
  EXPECT_EQ(*g[1].weightDecay, 0.01);
  EXPECT_EQ(*g[2].lr, 0.1);
  EXPECT_EQ(*g[2].weightDecay, 0.25);
  // Each group steps with its own lr: p - lr * (g + wd * p).
  for (const Tensor& p : {a, b, c}) p.setGrad(grad({1}));
  opt.step();
  EXPECT_DOUBLE_EQ(a.toVector<double>()[0], 1 - 0.1 * (1 + 0.01 * 1));
  EXPECT_DOUBLE_EQ(b.toVector<double>()[0], 2 - 0.5 * (1 + 0.01 * 2));
  EXPECT_DOUBLE_EQ(c.toVector<double>()[0], 3 - 0.1 * (1 + 0.25 * 3));
  Tensor d = param({4});
  opt.addParamGroup({.params = {d}, .lr = 1.0});
  EXPECT_EQ(*opt.paramGroups()[3].weightDecay, 0.01);
  EXPECT_EQ(errorOf([&] { opt.addParamGroup({.params = {a}}); }),
            "SGD: parameter 0 of group 4 (f64[1]@cpu) appears twice (in this group or an earlier one)");
}

TEST(Optim, ConstructionErrors) {
  Tensor p = param({1});
  EXPECT_EQ(errorOf([&] { optim::SGD(std::vector<Tensor>{}); }),
            "SGD: parameter group 0 is empty (an optimizer needs parameters to update)");
  EXPECT_EQ(errorOf([&] { optim::SGD(std::vector<optim::ParamGroup>{}); }),
            "SGD: expected at least one parameter group, got none");
  EXPECT_EQ(errorOf([&] {
              optim::SGD({p, p});
            }),
            "SGD: parameter 1 of group 0 (f64[1]@cpu) appears twice (in this group or an earlier one)");
  EXPECT_EQ(errorOf([&] { optim::Adam({p * 2.0}); }),
            "Adam: parameter 0 of group 0 (f64[1]@cpu) is not a leaf (it was computed by MulBackward); optimize the "
            "leaf it came from");
  EXPECT_EQ(errorOf([&] { optim::Adam({zeros({2}, DType::i64)}); }),
            "Adam: parameter 0 of group 0 is i64[2]@cpu; only floating-point tensors can be optimized");
  EXPECT_EQ(errorOf([&] { optim::AdamW({Tensor()}); }), "AdamW: parameter 0 of group 0 is an undefined tensor");
  EXPECT_EQ(errorOf([&] { optim::SGD({p}, {.lr = -1}); }), "SGD: invalid learning rate -1 in parameter group 0");
  EXPECT_EQ(errorOf([&] { optim::SGD({p}, {.weightDecay = -0.5}); }),
            "SGD: invalid weight decay -0.5 in parameter group 0");
  EXPECT_EQ(errorOf([&] { optim::SGD({p}, {.momentum = -0.5}); }), "SGD: invalid momentum -0.5");
  EXPECT_EQ(errorOf([&] { optim::SGD({p}, {.nesterov = true}); }),
            "SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got momentum=0, dampening=0");
  EXPECT_EQ(errorOf([&] { optim::SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); }),
            "SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got momentum=0.9, dampening=0.1");
  EXPECT_EQ(errorOf([&] { optim::Adam({p}, {.beta1 = 1.0}); }), "Adam: invalid beta1 1 (expected 0 <= beta1 < 1)");
  EXPECT_EQ(errorOf([&] { optim::AdamW({p}, {.beta2 = -0.1}); }),
            "AdamW: invalid beta2 -0.1 (expected 0 <= beta2 < 1)");
  EXPECT_EQ(errorOf([&] { optim::Adam({p}, {.eps = -1e-8}); }), "Adam: invalid eps -1e-08");
}

TEST(Optim, ZeroGradAndParametersWithoutGradients) {
  Tensor a = param({1, 2}), b = param({3});
  optim::Adam opt({a, b});
  sum(a * 3.0).backward();
  opt.step();  // b has no gradient: skipped, no state
  EXPECT_NE(opt.state(a), nullptr);
  EXPECT_EQ(opt.state(b), nullptr);
  EXPECT_EQ(b.toVector<double>(), (std::vector<double>{3}));
  opt.zeroGrad(/*setToNone=*/false);
  EXPECT_EQ(a.grad().toVector<double>(), (std::vector<double>{0, 0}));
  EXPECT_FALSE(b.grad().defined());
  opt.zeroGrad();
  EXPECT_FALSE(a.grad().defined());
  // The step recorded no history: the parameters are still leaves, grad mode is on.
  EXPECT_TRUE(a.isLeaf());
  EXPECT_TRUE(a.requiresGrad());
  EXPECT_TRUE(isGradEnabled());
}

// SGD's equations in double on f64 parameters: the same operations in the
// same order, so equal up to a few ulp (kiln's f64 kernels may use other
// instructions than the compiler does here; EXPECT_DOUBLE_EQ is 4 ulp).
TEST(Optim, SgdMomentumNesterovWeightDecayInF64) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
    const double lr = 0.1, momentum = 0.9, dampening = nesterov ? 0.0 : 0.3, wd = 0.05;
    Tensor p = param({1.0, -2.0});
    optim::SGD opt({p},
                   {.lr = lr, .momentum = momentum, .dampening = dampening, .weightDecay = wd, .nesterov = nesterov});
    std::vector<double> x = {1.0, -2.0}, buf(2);
    const std::vector<std::vector<double>> grads = {{0.5, 1.0}, {-0.25, 2.0}, {1.5, -1.0}, {0.0, 0.125}};
    for (size_t t = 0; t < grads.size(); ++t) {
      p.setGrad(grad(grads[t]));
      opt.step();
      for (size_t i = 0; i < 2; ++i) {
        double g = grads[t][i] + x[i] * wd;
        buf[i] = t == 0 ? g : buf[i] * momentum + g * (1 - dampening);  // first step: buf = g
        g = nesterov ? g + buf[i] * momentum : buf[i];
        x[i] = x[i] + g * -lr;
      }
      std::vector<double> got = p.toVector<double>();
      for (size_t i = 0; i < 2; ++i) EXPECT_DOUBLE_EQ(got[i], x[i]) << "step " << t << ", element " << i;
      std::vector<double> b = opt.momentumBuffer(p).toVector<double>();
      for (size_t i = 0; i < 2; ++i) EXPECT_DOUBLE_EQ(b[i], buf[i]);
    }
  }
}

// Adam, AdamW and amsgrad: bias-corrected moments, in double.
TEST(Optim, AdamAndAdamWInF64) {
  struct Case {
    const char* name;
    bool decoupled, amsgrad;
    double wd;
  };
  for (Case c :
       {Case{"adam", false, false, 0.0}, Case{"adam_l2", false, false, 0.1}, Case{"adam_amsgrad", false, true, 0.0},
        Case{"adamw", true, false, 0.1}, Case{"adamw_amsgrad", true, true, 0.01}}) {
    SCOPED_TRACE(c.name);
    const double lr = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-6;
    Tensor p = param({0.5, -1.5, 2.0});
    std::unique_ptr<optim::Adam> opt;
    if (c.decoupled)
      opt = std::make_unique<optim::AdamW>(
          std::vector<Tensor>{p},
          optim::AdamWOptions{
              .lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weightDecay = c.wd, .amsgrad = c.amsgrad});
    else
      opt = std::make_unique<optim::Adam>(
          std::vector<Tensor>{p},
          optim::AdamOptions{
              .lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weightDecay = c.wd, .amsgrad = c.amsgrad});
    std::vector<double> x = {0.5, -1.5, 2.0}, m(3), v(3), vmax(3);
    const std::vector<std::vector<double>> grads = {
        {1.0, -0.5, 0.25}, {3.0, 0.5, -0.25}, {0.1, 0.1, 0.1}, {-2.0, 0.0, 1.0}};
    for (size_t t = 0; t < grads.size(); ++t) {
      p.setGrad(grad(grads[t]));
      opt->step();
      const double step = static_cast<double>(t + 1);
      for (size_t i = 0; i < 3; ++i) {
        double g = grads[t][i];
        if (c.wd != 0) {
          if (c.decoupled)
            x[i] = x[i] * (1 - lr * c.wd);
          else
            g = g + x[i] * c.wd;
        }
        m[i] = m[i] + (g - m[i]) * (1 - b1);  // lerp with weight 0.2 < 0.5
        v[i] = v[i] * b2 + g * (1 - b2) * g;
        vmax[i] = std::max(vmax[i], v[i]);
        const double stepSize = lr / (1 - std::pow(b1, step));
        const double denom = std::sqrt(c.amsgrad ? vmax[i] : v[i]) / std::pow(1 - std::pow(b2, step), 0.5) + eps;
        x[i] = x[i] + m[i] * -stepSize / denom;
      }
      std::vector<double> got = p.toVector<double>();
      for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(got[i], x[i]) << "step " << t << ", element " << i;
    }
    const optim::AdamParamState* s = opt->state(p);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->step, 4);
    EXPECT_EQ(s->maxExpAvgSq.defined(), c.amsgrad);
    std::vector<double> gotM = s->expAvg.toVector<double>(), gotV = s->expAvgSq.toVector<double>();
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_DOUBLE_EQ(gotM[i], m[i]);
      EXPECT_DOUBLE_EQ(gotV[i], v[i]);
    }
  }
}

TEST(Optim, AdamWDefaultsAreTorchs) {
  Tensor p = param({1});
  optim::AdamW adamw({p});
  EXPECT_EQ(adamw.options().weightDecay, 1e-2);
  EXPECT_EQ(*adamw.paramGroups()[0].weightDecay, 1e-2);
  EXPECT_EQ(adamw.options().lr, 1e-3);
  EXPECT_EQ(adamw.options().beta1, 0.9);
  EXPECT_EQ(adamw.options().beta2, 0.999);
  EXPECT_EQ(adamw.options().eps, 1e-8);
  optim::Adam adam({param({1})});
  EXPECT_EQ(adam.options().weightDecay, 0.0);
  optim::SGD sgd({param({1})});
  EXPECT_EQ(sgd.options().lr, 1e-3);
}

// Schedules against their closed forms, computed here from the formulas.

TEST(OptimSchedule, StepLRIsBaseTimesGammaToTheFloor) {
  Tensor p = param({0});
  optim::SGD opt({p}, {.lr = 0.3});
  optim::StepLR sched(opt, /*stepSize=*/4, /*gamma=*/0.5);
  for (int64_t t = 0; t <= 20; ++t) {
    if (t > 0) sched.step();
    EXPECT_EQ(sched.lastEpoch(), t);
    // Multiplying by 0.5 is exact, so the recursive form equals the closed one.
    EXPECT_EQ(*opt.paramGroups()[0].lr, 0.3 * std::pow(0.5, static_cast<double>(t / 4))) << t;
  }
}

TEST(OptimSchedule, CosineAnnealingFollowsTheClosedForm) {
  Tensor p = param({0});
  optim::SGD opt({p}, {.lr = 0.1});
  const double etaMin = 0.002;
  const int64_t tMax = 10;
  optim::CosineAnnealingLR sched(opt, tMax, etaMin);
  EXPECT_EQ(*opt.paramGroups()[0].lr, 0.1);
  for (int64_t t = 1; t <= 3 * tMax; ++t) {
    sched.step();
    const double closed =
        etaMin + (0.1 - etaMin) * (1 + std::cos(std::numbers::pi * static_cast<double>(t) / tMax)) / 2;
    // The recursive form rounds at every step: within 1e-14 of the lr.
    EXPECT_NEAR(sched.lastLr()[0], closed, 1e-14 * 0.1) << "epoch " << t;
  }
  // At tMax it reaches etaMin, at 2 tMax it is back at the base.
  optim::SGD opt2({param({0})}, {.lr = 1.0});
  optim::CosineAnnealingLR cos2(opt2, 4);
  for (int i = 0; i < 4; ++i) cos2.step();
  EXPECT_NEAR(cos2.lastLr()[0], 0.0, 1e-16);
  for (int i = 0; i < 4; ++i) cos2.step();
  EXPECT_NEAR(cos2.lastLr()[0], 1.0, 1e-14);
}

TEST(OptimSchedule, LinearWarmupThenCosineCompose) {
  Tensor p = param({0});
  optim::SGD opt({p}, {.lr = 0.01});
  optim::LinearLR warmup(opt, /*startFactor=*/0.25, /*endFactor=*/1.0, /*totalIters=*/3);
  optim::CosineAnnealingLR cosine(opt, /*tMax=*/10);
  EXPECT_EQ(warmup.baseLrs()[0], 0.01);
  EXPECT_EQ(cosine.baseLrs()[0], 0.01);  // the initialLr, not the warmed-up 0.0025
  EXPECT_DOUBLE_EQ(*opt.paramGroups()[0].lr, 0.01 * 0.25);
  for (int64_t t = 1; t <= 10; ++t) {
    warmup.step();
    cosine.step();
    const double warm = 0.25 + (1.0 - 0.25) * static_cast<double>(std::min<int64_t>(t, 3)) / 3;
    const double cos = (1 + std::cos(std::numbers::pi * static_cast<double>(t) / 10)) / 2;
    EXPECT_NEAR(*opt.paramGroups()[0].lr, 0.01 * warm * cos, 1e-14 * 0.01) << "epoch " << t;
  }
}

TEST(OptimSchedule, SchedulesSetEveryGroup) {
  Tensor a = param({0}), b = param({0});
  optim::SGD opt({{.params = {a}, .lr = 1.0}, {.params = {b}, .lr = 0.1}});
  optim::StepLR sched(opt, 1, 0.5);
  sched.step();
  EXPECT_EQ(sched.lastLr(), (std::vector<double>{0.5, 0.05}));
  EXPECT_EQ(*opt.paramGroups()[1].lr, 0.05);
}

TEST(OptimSchedule, Errors) {
  optim::SGD opt({param({0})});
  EXPECT_EQ(errorOf([&] { optim::StepLR(opt, 0); }), "StepLR: stepSize must be positive, got 0");
  EXPECT_EQ(errorOf([&] { optim::CosineAnnealingLR(opt, -1); }), "CosineAnnealingLR: tMax must be positive, got -1");
  EXPECT_EQ(errorOf([&] { optim::LinearLR(opt, 0.0); }),
            "LinearLR: startFactor must be greater than 0 and at most 1, got 0");
  EXPECT_EQ(errorOf([&] { optim::LinearLR(opt, 0.5, 1.5); }), "LinearLR: endFactor must be between 0 and 1, got 1.5");
  optim::StepLR sched(opt, 2);
  opt.addParamGroup({.params = {param({1})}});
  EXPECT_EQ(errorOf([&] { sched.step(); }),
            "LRScheduler: the optimizer has 2 parameter groups, but the scheduler was made for 1 (add groups before "
            "making the scheduler)");
}

}  // namespace
}  // namespace kiln
