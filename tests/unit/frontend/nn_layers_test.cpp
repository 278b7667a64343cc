// The layers of kiln::nn: their parameters (names, shapes, initial values
// as PyTorch's), their forward against the functions they call, written
// out here, and their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

/// Checks samples of U(-bound, bound) (1e5 of them or so): inside the bound
/// as f32 rounds it, reaching within 0.2% of it (missed with odds e^-100
/// for 5e4 samples), mean within 5 standard errors of 0.
void expectUniform(const Tensor& t, double bound) {
  std::vector<float> v = t.toVector();
  double mean = 0, lo = INFINITY, hi = -INFINITY;
  for (float x : v) mean += x, lo = std::min<double>(lo, x), hi = std::max<double>(hi, x);
  mean /= static_cast<double>(v.size());
  EXPECT_GE(lo, -static_cast<double>(static_cast<float>(bound)));
  EXPECT_LE(hi, static_cast<double>(static_cast<float>(bound)));
  EXPECT_LE(lo, -bound * 0.998);
  EXPECT_GE(hi, bound * 0.998);
  EXPECT_NEAR(mean, 0.0, 5 * bound / std::sqrt(3.0 * static_cast<double>(v.size())));
}

TEST(NnLayers, LinearParametersAndPyTorchsInit) {
  nn::Linear fc(200, 500);
  EXPECT_EQ(fc->namedParameters().keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(fc->weight.str(), "f32[500,200]@cpu");
  EXPECT_EQ(fc->bias.str(), "f32[500]@cpu");
  EXPECT_TRUE(fc->weight.requiresGrad());
  // kaiming_uniform_(a=√5) on fan_in 200 and the bias: both U(±1/√200).
  expectUniform(fc->weight, 1 / std::sqrt(200.0));
  nn::Linear wide(50, 5000);
  expectUniform(wide->bias, 1 / std::sqrt(50.0));
  nn::Linear noBias(3, 2, /*bias=*/false);
  EXPECT_EQ(noBias->namedParameters().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_FALSE(noBias->bias.defined());
  // The same generator state draws the same weights.
  Generator g1(9), g2(9);
  fc->resetParameters(g1);
  std::vector<float> first = fc->weight.toVector();
  fc->resetParameters(g2);
  EXPECT_EQ(fc->weight.toVector(), first);
  nn::Linear empty(0, 3);  // no inputs: bound 0, as PyTorch
  EXPECT_EQ(empty->bias.toVector(), std::vector<float>(3, 0.0f));
  EXPECT_EQ(errorOf([] { nn::Linear(-1, 2); }), "Linear: expected sizes >= 0, got inFeatures=-1, outFeatures=2");
}

TEST(NnLayers, LinearForwardAndGradients) {
  nn::Linear fc(3, 2);
  {
    NoGradGuard noGrad;
    fc->weight.copy_(fromVector({1, 2, 3, -1, 0.5, 0}, {2, 3}));
    fc->bias.copy_(fromVector({0.25, -4}));
  }
  Tensor x = fromVector({1, 0, 2, -1, 1, 1, 0, 0, 0, 3, 2, 1}, {2, 2, 3});  // batch dims [2, 2]
  Tensor y = fc(x);
  ASSERT_EQ(y.str(), "f32[2,2,2]@cpu");
  // y = x · Wᵀ + b, by hand.
  EXPECT_EQ(y.toVector(), (std::vector<float>{7.25, -5, 4.25, -2.5, 0.25, -4, 10.25, -6}));
  sum(y).backward();
  // d sum / dW[o, i] = sum of x[..., i]; d sum / db[o] = number of rows.
  EXPECT_EQ(fc->weight.grad().toVector(), (std::vector<float>{3, 3, 4, 3, 3, 4}));
  EXPECT_EQ(fc->bias.grad().toVector(), (std::vector<float>{4, 4}));
  EXPECT_NE(errorOf([&] { fc(zeros({2, 4})); }), "no error");  // linear names the shapes
}

TEST(NnLayers, EmbeddingLooksUpRowsOfANormalTable) {
  nn::Embedding emb(1000, 100);
  EXPECT_EQ(emb->namedParameters().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(emb->weight.str(), "f32[1000,100]@cpu");
  // N(0, 1): mean and std of 1e5 samples within 5 standard errors.
  std::vector<float> w = emb->weight.toVector();
  double mean = 0, var = 0;
  for (float v : w) mean += v / 1e5;
  for (float v : w) var += (v - mean) * (v - mean) / (1e5 - 1);
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(1e5));
  EXPECT_NEAR(std::sqrt(var), 1.0, 5 / std::sqrt(2e5));
  nn::Embedding small(4, 2);
  {
    NoGradGuard noGrad;
    small->weight.copy_(fromVector({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}));
  }
  Tensor idx = fromVector(std::vector<int64_t>{3, 0, 3, 1}, {2, 2});
  Tensor out = small(idx);
  EXPECT_EQ(out.str(), "f32[2,2,2]@cpu");
  EXPECT_EQ(out.toVector(), (std::vector<float>{30, 31, 0, 1, 30, 31, 10, 11}));
  sum(out).backward();  // row 3 was used twice
  EXPECT_EQ(small->weight.grad().toVector(), (std::vector<float>{1, 1, 1, 1, 0, 0, 2, 2}));
  EXPECT_EQ(errorOf([] { nn::Embedding(3, -1); }),
            "Embedding: expected sizes >= 0, got numEmbeddings=3, embeddingDim=-1");
}

// A module-level check that the pieces train together: an MLP of the
// issue's shape (Linear-ReLU-Dropout-LayerNorm-Linear) learns XOR of the
// signs of two coordinates (not linearly separable) on a 16x16 grid, full
// batch, with AdamW and a cosine schedule. Thresholds: the loss falls from
// about ln 2 (an untrained net) below 0.05 in evaluation mode, and at least
// 250 of the 256 points are classified right. Measured with seeds 0 to 11:
// final losses 0.009 to 0.016, 255 or 256 points right.
TEST(NnTraining, AnMlpLearnsXor) {
  manualSeed(3);
  std::vector<float> points;
  std::vector<int64_t> labels;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      const float x = -1 + (i + 0.5f) / 8, y = -1 + (j + 0.5f) / 8;
      points.insert(points.end(), {x, y});
      labels.push_back((x > 0) != (y > 0));
    }
  Tensor x = fromVector(points, {256, 2}), y = fromVector(labels, {256});
  nn::Sequential mlp(nn::Linear(2, 32), nn::ReLU(), nn::Dropout(0.1), nn::LayerNorm(32), nn::Linear(32, 2));
  optim::AdamW opt(mlp->parameters(), {.lr = 0.05});
  optim::CosineAnnealingLR schedule(opt, /*tMax=*/150, /*etaMin=*/0.005);
  double first = 0;
  for (int step = 0; step < 150; ++step) {
    opt.zeroGrad();
    Tensor loss = crossEntropy(mlp(x), y);
    loss.backward();
    opt.step();
    schedule.step();
    if (step == 0) first = loss.item();
  }
  mlp->eval();  // Dropout off
  NoGradGuard noGrad;
  Tensor logits = mlp(x);
  const double last = crossEntropy(logits, y).item();
  const int64_t correct = sum(argmax(logits, 1) == y).item<int64_t>();
  EXPECT_GT(first, 0.5);
  EXPECT_LT(last, 0.05) << "first " << first;
  EXPECT_GE(correct, 250) << "of 256";
  std::printf("[xor] loss %.4f -> %.4f (eval), %lld of 256 right\n", first, last, static_cast<long long>(correct));
}

// A model is ordinary code on tensors: kiln::compile traces it (its
// parameters become captured inputs, read at every call) and the compiled
// program equals eager bit for bit.
TEST(NnLayers, CompiledModelEqualsEager) {
  manualSeed(11);
  nn::Sequential mlp(nn::Linear(8, 16), nn::ReLU(), nn::LayerNorm(16), nn::Linear(16, 4));
  auto compiled = compile([&](const Tensor& x) { return mlp(x); });
  Tensor x = randn({5, 8});
  Tensor eager;
  {
    NoGradGuard noGrad;
    eager = mlp(x);
  }
  EXPECT_EQ(compiled(x).toVector(), eager.toVector());
  // New parameter values are seen by the same compiled program.
  {
    NoGradGuard noGrad;
    mlp->at<nn::LinearImpl>(3).bias.fill_(1.5);
    eager = mlp(x);
  }
  EXPECT_EQ(compiled(x).toVector(), eager.toVector());
  EXPECT_EQ(compiled.numCompiles(), 1);
}

TEST(NnLayers, DropoutDropsInTrainingOnlyWithOneDrawPerCall) {
  Generator gen(17);
  nn::Dropout drop(0.3, gen);  // shares gen's state
  EXPECT_TRUE(drop->parameters().empty());
  Tensor x = ones({100000});
  Tensor y = drop(x);
  EXPECT_EQ(gen.offset(), 1u);
  // About 30% zeros (within 5 standard errors), the rest 1 / 0.7.
  std::vector<float> v = y.toVector();
  const double zeros = static_cast<double>(std::count(v.begin(), v.end(), 0.0f)) / 1e5;
  EXPECT_NEAR(zeros, 0.3, 5 * std::sqrt(0.3 * 0.7 / 1e5));
  for (float e : v) ASSERT_TRUE(e == 0.0f || std::abs(e - 1 / 0.7) < 1e-6) << e;
  // The module makes kiln::dropout's draw: the same generator state, the same mask.
  Generator replay(17);
  EXPECT_EQ(v, dropout(x, 0.3, true, replay).toVector());
  EXPECT_NE(drop(x).toVector(), v);  // the next call draws anew
  EXPECT_EQ(gen.offset(), 2u);
  // Evaluation mode: the input itself, no draw.
  drop->eval();
  Tensor same = drop(x);
  EXPECT_EQ(same.impl(), x.impl());
  EXPECT_EQ(gen.offset(), 2u);
  // Without a generator: the default one, which manualSeed restarts.
  nn::Dropout byDefault(0.5);
  manualSeed(4);
  std::vector<float> first = byDefault(x).toVector();
  manualSeed(4);
  EXPECT_EQ(byDefault(x).toVector(), first);
  EXPECT_EQ(errorOf([] { nn::Dropout(1.5); }), "Dropout: p must be in [0, 1], got 1.5");
  EXPECT_EQ(errorOf([] { nn::Dropout(-0.1); }), "Dropout: p must be in [0, 1], got -0.1");
}

TEST(NnLayers, LayerNormParametersAndForward) {
  nn::LayerNorm ln({2, 3}, /*eps=*/1e-3);
  EXPECT_EQ(ln->namedParameters().keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(ln->weight.toVector(), std::vector<float>(6, 1.0f));
  EXPECT_EQ(ln->bias.toVector(), std::vector<float>(6, 0.0f));
  {
    NoGradGuard noGrad;
    ln->weight.copy_(fromVector({1, 2, 3, 4, 5, 6}, {2, 3}));
    ln->bias.fill_(0.5);
  }
  Tensor x = fromVector({1, 2, 3, 4, 5, 6, 0, 0, 0, 1, 1, 7}, {2, 2, 3});
  // Each [2, 3] slice: (x - mean) / sqrt(var + eps) * weight + bias, written out in double.
  std::vector<float> xv = x.toVector(), w = ln->weight.toVector(), y = ln(x).toVector();
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += xv[r * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) var += (xv[r * 6 + i] - mean) * (xv[r * 6 + i] - mean) / 6.0;
    for (int i = 0; i < 6; ++i)
      EXPECT_NEAR(y[r * 6 + i], (xv[r * 6 + i] - mean) / std::sqrt(var + 1e-3) * w[i] + 0.5, 1e-5) << r << "," << i;
  }
  // Gradients reach the affine parameters.
  sum(ln(x)).backward();
  EXPECT_EQ(ln->bias.grad().toVector(), std::vector<float>(6, 2.0f));  // two slices
  nn::LayerNorm plain(4, 1e-5, /*elementwiseAffine=*/false);
  EXPECT_TRUE(plain->parameters().empty());
  nn::LayerNorm noBias(4, 1e-5, true, /*bias=*/false);
  EXPECT_EQ(noBias->namedParameters().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(errorOf([] { nn::LayerNorm(Shape{}); }), "LayerNorm: normalizedShape is empty");
  EXPECT_EQ(errorOf([] {
              nn::LayerNorm(Shape{3, 0});
            }),
            "LayerNorm: normalizedShape [3,0] has a size that is not positive");
}

TEST(NnLayers, GELUExactAndTanh) {
  nn::GELU exact, approx("tanh");
  EXPECT_TRUE(exact->parameters().empty());
  EXPECT_EQ(exact->approximate, "none");
  std::vector<float> xs = {-4, -1.5, -0.5, 0, 0.25, 1, 3};
  Tensor x = fromVector(xs).setRequiresGrad();
  std::vector<float> e = exact(x).toVector(), t = approx(x).toVector();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double wantE = v / 2 * (1 + std::erf(v / std::sqrt(2.0)));
    const double wantT = v / 2 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(e[i], wantE, 1e-6 * std::max(1.0, std::abs(wantE))) << v;
    EXPECT_NEAR(t[i], wantT, 1e-6 * std::max(1.0, std::abs(wantT))) << v;
  }
  sum(exact(x)).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_EQ(errorOf([] { nn::GELU("erf"); }), "GELU: approximate must be \"none\" or \"tanh\", got \"erf\"");
}

TEST(NnLayers, SoftplusIsKilnSoftplusWithItsBetaAndThreshold) {
  nn::Softplus plain, steep(2.0, 1.0);
  EXPECT_TRUE(plain->parameters().empty());
  EXPECT_EQ(steep->beta, 2.0);
  EXPECT_EQ(steep->threshold, 1.0);
  std::vector<float> xs = {-30, -2, -0.5, 0, 0.25, 0.75, 3, 25};
  Tensor x = fromVector(xs).setRequiresGrad();
  std::vector<float> p = plain(x).toVector(), s = steep(x).toVector();
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double v = xs[i];
    const double wantP = static_cast<double>(v > 20 ? v : std::log1p(std::exp(v)));
    const double wantS = static_cast<double>(2 * v > 1 ? v : std::log1p(std::exp(2 * v)) / 2);
    EXPECT_NEAR(p[i], wantP, 2e-7 * std::abs(wantP)) << xs[i];
    EXPECT_NEAR(s[i], wantS, 2e-7 * std::abs(wantS)) << xs[i];
  }
  EXPECT_EQ(s, softplus(x, 2.0, 1.0).toVector());
  sum(steep(x)).backward();
  // Past the threshold the gradient is 1; below, sigmoid(2x).
  EXPECT_EQ(x.grad().toVector()[7], 1.0f);
  EXPECT_NEAR(x.grad().toVector()[3], 0.5, 1e-7);
}

TEST(NnLayers, ReLUHasNoParameters) {
  nn::ReLU relu;
  EXPECT_TRUE(relu->parameters().empty());
  EXPECT_EQ(relu(fromVector({-1, 0, 2})).toVector(), (std::vector<float>{0, 0, 2}));
}

}  // namespace
}  // namespace kiln
