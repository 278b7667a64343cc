// kiln::batchNorm and kiln::groupNorm (frontend/normalization.h) and the
// modules nn::BatchNorm2d and nn::GroupNorm against plain f64 loops written
// here from PyTorch's definitions (biased variance to normalize, unbiased
// to update running_var), their gradients against finite differences, a
// small conv-free CNN piece compiled against eager, OpenCL against the CPU,
// and their errors.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

Tensor sample(const Shape& shape, uint64_t seed, double scale = 1, double shift = 0) {
  Generator g(seed);
  NoGradGuard noGrad;
  return randn(shape, g).to(DType::f64) * scale + shift;
}

std::vector<double> values(const Tensor& t) { return t.to(DType::f64).toVector<double>(); }

void expectNear(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << ": element " << i;
}

/// Per-channel statistics of x [N, C, *] (flattened to [N, C, L]) over N and L.
struct ChannelStats {
  std::vector<double> mean, biasedVar, unbiasedVar;
};
ChannelStats channelStats(const std::vector<double>& x, int64_t n, int64_t c, int64_t l) {
  ChannelStats s;
  for (int64_t ch = 0; ch < c; ++ch) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < l; ++j) total += x[(i * c + ch) * l + j];
    const double m = total / static_cast<double>(n * l);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < l; ++j) sq += (x[(i * c + ch) * l + j] - m) * (x[(i * c + ch) * l + j] - m);
    s.mean.push_back(m);
    s.biasedVar.push_back(sq / static_cast<double>(n * l));
    s.unbiasedVar.push_back(sq / static_cast<double>(n * l - 1));
  }
  return s;
}

/// (x - mean) / sqrt(var + eps) * w + b per channel.
std::vector<double> refNormalize(const std::vector<double>& x, int64_t n, int64_t c, int64_t l,
                                 const std::vector<double>& mean, const std::vector<double>& var,
                                 const std::vector<double>& w, const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < l; ++j) {
        const size_t k = static_cast<size_t>((i * c + ch) * l + j);
        y[k] = (x[k] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
      }
  return y;
}

TEST(BatchNorm, TrainingMatchesTheDefinitionAndUpdatesRunningStatsUnbiased) {
  for (const Shape& shape : {Shape{4, 3, 5, 2}, Shape{6, 3}, Shape{2, 3, 7}}) {
    SCOPED_TRACE(ir::shapeStr(shape));
    const int64_t n = shape[0], c = shape[1], l = ir::numel(shape) / (n * c);
    Tensor x = sample(shape, 1, 2.0, 0.5);
    Tensor w = sample({c}, 2), b = sample({c}, 3);
    Tensor rm = sample({c}, 4), rv = sample({c}, 5, 0.1, 1.0);
    const std::vector<double> rm0 = values(rm), rv0 = values(rv);
    const double momentum = 0.3, eps = 1e-3;
    Tensor y = batchNorm(x, rm, rv, w, b, /*training=*/true, momentum, eps);
    const std::vector<double> hx = values(x);
    const ChannelStats s = channelStats(hx, n, c, l);
    expectNear(values(y), refNormalize(hx, n, c, l, s.mean, s.biasedVar, values(w), values(b), eps), 1e-12, "y");
    std::vector<double> wantMean, wantVar;
    for (int64_t ch = 0; ch < c; ++ch) {
      wantMean.push_back((1 - momentum) * rm0[ch] + momentum * s.mean[ch]);
      wantVar.push_back((1 - momentum) * rv0[ch] + momentum * s.unbiasedVar[ch]);
    }
    expectNear(values(rm), wantMean, 1e-12, "running_mean");
    expectNear(values(rv), wantVar, 1e-12, "running_var");
    // Undefined running statistics and affine parameters are allowed in training.
    expectNear(
        values(batchNorm(x, {}, {}, {}, {}, true, momentum, eps)),
        refNormalize(hx, n, c, l, s.mean, s.biasedVar, std::vector<double>(c, 1), std::vector<double>(c, 0), eps),
        1e-12, "no affine");
  }
}

TEST(BatchNorm, EvalUsesTheRunningStatsAndLeavesThem) {
  Tensor x = sample({3, 2, 4, 4}, 10);
  Tensor w = sample({2}, 11), b = sample({2}, 12), rm = sample({2}, 13), rv = sample({2}, 14, 0.2, 1.5);
  const std::vector<double> rm0 = values(rm), rv0 = values(rv);
  Tensor y = batchNorm(x, rm, rv, w, b, /*training=*/false, 0.1, 1e-5);
  expectNear(values(y), refNormalize(values(x), 3, 2, 16, rm0, rv0, values(w), values(b), 1e-5), 1e-12, "eval");
  EXPECT_EQ(values(rm), rm0);
  EXPECT_EQ(values(rv), rv0);
}

TEST(BatchNorm, Gradcheck) {
  Tensor rm = zeros({3}, DType::f64), rv = ones({3}, DType::f64);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) { return batchNorm(in[0], rm, rv, in[1], in[2], training, 0.1, 1e-5); },
        {sample({2, 3, 2, 3}, 20).setRequiresGrad(), sample({3}, 21).setRequiresGrad(),
         sample({3}, 22).setRequiresGrad()}));
  }
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return batchNorm(in[0], {}, {}, {}, {}, true); },
                        {sample({4, 2, 3}, 23).setRequiresGrad()}));
  // f32 in f32 and f16 in f32: the forward is the f64 one, rounded.
  Tensor x = sample({4, 3, 3, 3}, 24);
  const std::vector<double> want = values(batchNorm(x, {}, {}, {}, {}, true));
  expectNear(values(batchNorm(x.to(DType::f32), {}, {}, {}, {}, true)), want, 1e-5, "f32");
  Tensor h = batchNorm(x.to(DType::f16), {}, {}, {}, {}, true);
  EXPECT_EQ(h.dtype(), DType::f16);
  expectNear(values(h), want, 1e-2, "f16");
}

TEST(GroupNorm, MatchesTheDefinitionAndGradcheck) {
  const int64_t n = 2, c = 6, g = 3, hw = 5;
  Tensor x = sample({n, c, hw}, 30, 3.0, -1.0), w = sample({c}, 31), b = sample({c}, 32);
  const std::vector<double> hx = values(x), hw8 = values(w), hb = values(b);
  // Group k of sample i: channels 2k, 2k+1, all positions.
  std::vector<double> want(hx.size());
  const int64_t per = c / g * hw;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < g; ++k) {
      const size_t base = static_cast<size_t>((i * g + k) * per);
      double m = 0, v = 0;
      for (int64_t j = 0; j < per; ++j) m += hx[base + j];
      m /= static_cast<double>(per);
      for (int64_t j = 0; j < per; ++j) v += (hx[base + j] - m) * (hx[base + j] - m);
      v /= static_cast<double>(per);
      for (int64_t j = 0; j < per; ++j) {
        const int64_t ch = k * (c / g) + j / hw;
        want[base + j] = (hx[base + j] - m) / std::sqrt(v + 1e-5) * hw8[ch] + hb[ch];
      }
    }
  expectNear(values(groupNorm(x, g, w, b)), want, 1e-12, "group_norm");
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) { return groupNorm(in[0], 2, in[1], in[2]); },
      {sample({2, 4, 3}, 33).setRequiresGrad(), sample({4}, 34).setRequiresGrad(), sample({4}, 35).setRequiresGrad()}));
}

TEST(BatchNorm, ModuleParametersBuffersAndModes) {
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(bn->namedParameters().keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(bn->namedBuffers().keys(),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn->stateDict().keys(),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn->numBatchesTracked.str(), "i64[]@cpu");
  EXPECT_EQ(bn->weight.toVector(), std::vector<float>(3, 1));
  EXPECT_EQ(bn->bias.toVector(), std::vector<float>(3, 0));
  EXPECT_EQ(bn->runningMean.toVector(), std::vector<float>(3, 0));
  EXPECT_EQ(bn->runningVar.toVector(), std::vector<float>(3, 1));
  Tensor x = sample({4, 3, 2, 2}, 40, 2.0, 1.0).to(DType::f32);
  const ChannelStats s = channelStats(values(x), 4, 3, 4);
  Tensor y = bn(x);
  EXPECT_EQ(bn->numBatchesTracked.item<int64_t>(), 1);
  std::vector<double> wantMean, wantVar;
  for (int ch = 0; ch < 3; ++ch) {
    wantMean.push_back(0.1 * s.mean[ch]);
    wantVar.push_back(0.9 + 0.1 * s.unbiasedVar[ch]);
  }
  expectNear(values(bn->runningMean), wantMean, 1e-6, "running_mean");
  expectNear(values(bn->runningVar), wantVar, 1e-6, "running_var");
  expectNear(values(y), refNormalize(values(x), 4, 3, 4, s.mean, s.biasedVar, {1, 1, 1}, {0, 0, 0}, 1e-5), 1e-5,
             "training");
  bn->eval();
  expectNear(values(bn(x)), refNormalize(values(x), 4, 3, 4, wantMean, wantVar, {1, 1, 1}, {0, 0, 0}, 1e-5), 1e-5,
             "eval");
  EXPECT_EQ(bn->numBatchesTracked.item<int64_t>(), 1) << "eval does not count";
  // momentum nullopt: a cumulative average; the first batch replaces the stats.
  nn::BatchNorm2d cumulative(3, 1e-5, std::nullopt);
  cumulative(x);
  expectNear(values(cumulative->runningMean), s.mean, 1e-6, "cumulative mean");
  // Without running stats, evaluation normalizes with the batch's.
  nn::BatchNorm2d untracked(3, 1e-5, 0.1, /*affine=*/false, /*trackRunningStats=*/false);
  EXPECT_TRUE(untracked->parameters().empty());
  EXPECT_TRUE(untracked->buffers().empty());
  untracked->eval();
  expectNear(values(untracked(x)), refNormalize(values(x), 4, 3, 4, s.mean, s.biasedVar, {1, 1, 1}, {0, 0, 0}, 1e-5),
             1e-5, "untracked eval");
  // The state dict round-trips into a fresh module.
  nn::BatchNorm2d copy(3);
  copy->loadStateDict(bn->stateDict());
  EXPECT_EQ(copy->runningVar.toVector(), bn->runningVar.toVector());
  EXPECT_EQ(copy->numBatchesTracked.item<int64_t>(), 1);
  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(gn->namedParameters().keys(), (std::vector<std::string>{"weight", "bias"}));
  Tensor z = sample({2, 4, 3, 3}, 41).to(DType::f32);
  expectNear(values(gn(z)), values(groupNorm(z, 2)), 0, "GroupNorm");
}

TEST(BatchNorm, CompiledCnnPieceEqualsEager) {
  // maxPool2d + batchNorm (training, updating running stats) + relu.
  Tensor x = randn({4, 3, 8, 8});
  Tensor w = randn({3}), b = randn({3});
  Tensor rmEager = zeros({3}), rvEager = ones({3}), rmCompiled = zeros({3}), rvCompiled = ones({3});
  const auto piece = [&](const Tensor& in, const Tensor& rm, const Tensor& rv, bool training) {
    return relu(batchNorm(maxPool2d(in, {2, 2}), rm, rv, w, b, training));
  };
  auto train = compile([&](const Tensor& in) { return piece(in, rmCompiled, rvCompiled, true); });
  auto eval = compile([&](const Tensor& in) { return piece(in, rmCompiled, rvCompiled, false); });
  for (int step = 0; step < 2; ++step) {
    const Tensor want = piece(x, rmEager, rvEager, true);
    const Tensor got = train(x);
    expectNear(values(got), values(want), 1e-5, "training output");
    expectNear(values(rmCompiled), values(rmEager), 1e-6, "running_mean");
    expectNear(values(rvCompiled), values(rvEager), 1e-6, "running_var");
  }
  EXPECT_EQ(train.numCompiles(), 1);
  expectNear(values(eval(x)), values(piece(x, rmEager, rvEager, false)), 1e-5, "eval output");
  // The pool alone is one kernel (its four strided views and three maxima).
  auto pool = compile([](const Tensor& in) { return maxPool2d(in, {2, 2}); });
  pool(x);
  EXPECT_EQ(pool.lastNumKernels(), 1) << pool.lastGraph();
}

TEST(BatchNorm, CompiledTrainingStepEqualsEager) {
  // Forward and backward of maxPool2d + batchNorm + relu in one program, on
  // an input of small integers (ties in the pool windows).
  Tensor x = (randn({2, 3, 6, 6}) * 2.0).to(DType::i32).to(DType::f32);
  Tensor upstream = randn({2, 3, 3, 3});
  const auto step = [](const Tensor& input, const Tensor& g, const Tensor& weight, const Tensor& bias) {
    Tensor in = input.detach().setRequiresGrad();
    Tensor w = weight.detach().setRequiresGrad(), b = bias.detach().setRequiresGrad();
    Tensor y = relu(batchNorm(maxPool2d(in, {3, 3}, Size2{2, 2}, {1, 1}), {}, {}, w, b, true));
    y.backward(g);
    return std::vector<Tensor>{y, in.grad(), w.grad(), b.grad()};
  };
  Tensor w = randn({3}), b = randn({3});
  const std::vector<Tensor> eager = step(x, upstream, w, b);
  auto compiled = compile(step);
  const std::vector<Tensor> got = compiled(x, upstream, w, b);
  ASSERT_EQ(got.size(), 4u);
  const char* names[] = {"y", "input grad", "weight grad", "bias grad"};
  for (size_t i = 0; i < 4; ++i) expectNear(values(got[i]), values(eager[i]), 1e-5, names[i]);
}

TEST(BatchNorm, CompiledModulesTrackTheirStatisticsAsEager) {
  // nn::BatchNorm2d in a compiled Sequential: every call updates the
  // running statistics and the counter, as the eager twin does.
  const auto net = [] {
    return nn::Sequential(nn::MaxPool2d(2), nn::BatchNorm2d(3), nn::ReLU(), nn::AdaptiveAvgPool2d(1), nn::Flatten());
  };
  nn::Sequential eager = net(), traced = net();
  auto f = compile([&](const Tensor& in) { return traced(in); });
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({4, 3, 6, 6});
    expectNear(values(f(x)), values(eager(x)), 1e-5, "output");
  }
  const nn::StateDict a = eager->stateDict(), b = traced->stateDict();
  for (const auto& [name, t] : a) expectNear(values(b.at(name)), values(t), 1e-6, name);
  EXPECT_EQ(b.at("1.num_batches_tracked").item<int64_t>(), 3);
}

TEST(BatchNorm, HalfPrecisionPoolsAndNorms) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Tensor x = randn({2, 3, 4, 4}).to(dtype);
    Tensor xf = x.to(DType::f32);  // the same values
    Tensor h = x.detach().setRequiresGrad(), f = xf.detach().setRequiresGrad();
    Tensor yh = maxPool2d(h, {2, 2}), yf = maxPool2d(f, {2, 2});
    EXPECT_EQ(yh.dtype(), dtype);
    EXPECT_EQ(values(yh), values(yf)) << "a max is exact";
    sum(yh.to(DType::f32)).backward();
    sum(yf).backward();
    EXPECT_EQ(values(h.grad()), values(f.grad()));
    expectNear(values(avgPool2d(x, {2, 2})), values(avgPool2d(xf, {2, 2})), 2e-2, "avg pool");
    expectNear(values(groupNorm(x, 3)), values(groupNorm(xf, 3)), 5e-2, "group norm");
  }
}

TEST(BatchNorm, OnOpenCLAsOnTheCpu) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  Tensor x = randn({4, 3, 5, 5}), w = randn({3}), b = randn({3});
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor rmd = rm.to(device), rvd = rv.to(device);
  Tensor y = batchNorm(x, rm, rv, w, b, true);
  Tensor yd = batchNorm(x.to(device), rmd, rvd, w.to(device), b.to(device), true);
  expectNear(values(yd.cpu()), values(y), 1e-5, "batch_norm");
  expectNear(values(rvd.cpu()), values(rv), 1e-6, "running_var");
  expectNear(values(groupNorm(x.to(device), 3, w.to(device), b.to(device)).cpu()), values(groupNorm(x, 3, w, b)), 1e-5,
             "group_norm");
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({2, 3, 4, 4});
  EXPECT_EQ(errorOf([&] { batchNorm(x, zeros({4}), ones({3}), {}, {}, true); }),
            "batch_norm: expected running_mean of shape [3] (the channels of f32[2,3,4,4]@cpu), got f32[4]@cpu");
  EXPECT_EQ(errorOf([&] { batchNorm(x, {}, {}, ones({2}), {}, true); }),
            "batch_norm: expected weight of shape [3] (the channels of f32[2,3,4,4]@cpu), got f32[2]@cpu");
  EXPECT_EQ(errorOf([&] {
              batchNorm(zeros({1, 3}), {}, {}, {}, {}, true);
            }),
            "batch_norm: expected more than 1 value per channel when training, got input f32[1,3]@cpu");
  EXPECT_EQ(errorOf([&] { batchNorm(x, {}, {}, {}, {}, false); }),
            "batch_norm: running_mean and running_var must be defined in evaluation mode");
  EXPECT_EQ(errorOf([&] { batchNorm(zeros({3}), {}, {}, {}, {}, true); }),
            "batch_norm: expected an input of at least 2 dims [N, C, *], got f32[3]@cpu");
  EXPECT_EQ(errorOf([&] { groupNorm(x, 2); }),
            "group_norm: expected the channels of f32[2,3,4,4]@cpu to be divisible by num_groups, got num_groups=2");
  EXPECT_EQ(errorOf([] { nn::GroupNorm(4, 6); }),
            "GroupNorm: numChannels must be divisible by numGroups, got numGroups=4, numChannels=6");
  nn::BatchNorm2d bn(3);
  EXPECT_EQ(errorOf([&] {
              bn(zeros({2, 3, 4}));
            }),
            "BatchNorm2d: expected a 4-d input [N, C, H, W], got f32[2,3,4]@cpu");
  EXPECT_EQ(errorOf([&] {
              bn(zeros({2, 4, 2, 2}));
            }),
            "batch_norm: expected running_mean of shape [4] (the channels of f32[2,4,2,2]@cpu), got f32[3]@cpu");
}

}  // namespace
}  // namespace kiln
