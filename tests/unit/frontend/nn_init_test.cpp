// nn::init and kiln::rand: sample statistics against the distributions'
// (1e5 samples, bounds of 5 standard errors: a false failure has odds below
// 1e-6), Kaiming and Xavier bounds against the formulas of torch.nn.init
// computed here, gains and fans, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

namespace init = nn::init;

constexpr int64_t kRows = 500, kCols = 200;  // 1e5 samples
constexpr double kN = kRows * kCols;

struct Stats {
  double mean = 0, std = 0, min = INFINITY, max = -INFINITY;
};

Stats statsOf(const Tensor& t) {
  std::vector<double> v = t.to(DType::f64).toVector<double>();
  Stats s;
  for (double x : v) s.mean += x, s.min = std::min(s.min, x), s.max = std::max(s.max, x);
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size() - 1));
  return s;
}

/// Checks samples of U(-bound, bound): inside the bound (as f32 rounds it),
/// reaching within 0.1% of it (missed by 1e5 samples with odds e^-100), and
/// with the mean and std of the distribution within 5 standard errors.
void expectUniform(const Tensor& t, double bound) {
  Stats s = statsOf(t);
  const double limit = static_cast<float>(bound);
  EXPECT_GE(s.min, -limit);
  EXPECT_LE(s.max, limit);
  EXPECT_LE(s.min, -bound * 0.999);
  EXPECT_GE(s.max, bound * 0.999);
  const double std = bound / std::sqrt(3.0);
  EXPECT_NEAR(s.mean, 0.0, 5 * std / std::sqrt(kN));
  // The sample variance of a uniform has relative standard error √(4/5 / n).
  EXPECT_NEAR(s.std / std, 1.0, 5 * 0.5 * std::sqrt(0.8 / kN));
}

/// Checks samples of N(mean, std²): mean and std within 5 standard errors.
void expectNormal(const Tensor& t, double mean, double std) {
  Stats s = statsOf(t);
  EXPECT_NEAR(s.mean, mean, 5 * std / std::sqrt(kN));
  EXPECT_NEAR(s.std / std, 1.0, 5 / std::sqrt(2 * kN));
}

TEST(NnInit, RandIsUniformOnMultiplesOfTwoToTheMinus24) {
  Generator gen(7);
  Tensor u = rand({kRows, kCols}, gen);
  EXPECT_EQ(gen.offset(), 1u);
  Stats s = statsOf(u);
  EXPECT_GE(s.min, 0.0);
  EXPECT_LT(s.max, 1.0);
  EXPECT_NEAR(s.mean, 0.5, 5 * std::sqrt(1.0 / 12 / kN));
  EXPECT_NEAR(s.std, std::sqrt(1.0 / 12), 5 * std::sqrt(1.0 / 12) * 0.5 * std::sqrt(0.8 / kN));
  for (float x : u.toVector()) ASSERT_EQ(x * 16777216.0f, std::floor(x * 16777216.0f)) << x;
  // A draw is a function of (seed, offset): the same state gives the same values.
  Generator again(7);
  EXPECT_EQ(rand({kRows, kCols}, again).toVector(), u.toVector());
  EXPECT_NE(rand({kRows, kCols}, again).toVector(), u.toVector());
}

TEST(NnInit, UniformAndNormalStatistics) {
  Generator gen(1);
  Tensor t = zeros({kRows, kCols});
  init::uniform_(t, -0.5, 2.5, gen);
  Stats s = statsOf(t);
  EXPECT_GE(s.min, -0.5);
  EXPECT_LE(s.max, 2.5);
  EXPECT_NEAR(s.mean, 1.0, 5 * 3 / std::sqrt(12 * kN));
  init::normal_(t, 3.0, 0.25, gen);
  expectNormal(t, 3.0, 0.25);
  init::normal_(t, 0.0, 1.0, gen);
  expectNormal(t, 0.0, 1.0);
  // Other dtypes are filled through a conversion; the dtype stays.
  Tensor d = zeros({kRows, kCols}, DType::f64);
  init::normal_(d, -1.0, 2.0, gen);
  EXPECT_EQ(d.dtype(), DType::f64);
  expectNormal(d, -1.0, 2.0);
}

TEST(NnInit, ConstantsAndParametersThatRequireGrad) {
  Tensor w = zeros({2, 3}).setRequiresGrad();
  const uint64_t version = w.version();
  init::constant_(w, 0.25);  // no NoGradGuard needed: init makes its own
  EXPECT_EQ(w.toVector(), std::vector<float>(6, 0.25f));
  EXPECT_TRUE(w.isLeaf());
  EXPECT_TRUE(w.requiresGrad());
  EXPECT_GT(w.version(), version);
  EXPECT_TRUE(isGradEnabled());
  init::ones_(w);
  EXPECT_EQ(w.toVector(), std::vector<float>(6, 1.0f));
  init::zeros_(w);
  EXPECT_EQ(w.toVector(), std::vector<float>(6, 0.0f));
  init::kaimingUniform_(w);
  EXPECT_TRUE(w.isLeaf());
  EXPECT_FALSE(w.grad().defined());
}

TEST(NnInit, GainsAreTorchs) {
  using init::Nonlinearity;
  EXPECT_EQ(init::calculateGain(Nonlinearity::linear), 1.0);
  EXPECT_EQ(init::calculateGain(Nonlinearity::conv2d), 1.0);
  EXPECT_EQ(init::calculateGain(Nonlinearity::sigmoid), 1.0);
  EXPECT_EQ(init::calculateGain(Nonlinearity::tanh), 5.0 / 3);
  EXPECT_EQ(init::calculateGain(Nonlinearity::relu), std::sqrt(2.0));
  EXPECT_EQ(init::calculateGain(Nonlinearity::leakyRelu), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_EQ(init::calculateGain(Nonlinearity::leakyRelu, std::sqrt(5.0)), std::sqrt(2.0 / 6));
  EXPECT_EQ(init::calculateGain(Nonlinearity::selu), 0.75);
}

TEST(NnInit, FansCountTheReceptiveField) {
  EXPECT_EQ(init::calculateFanInAndFanOut(zeros({4, 3})), (std::pair<int64_t, int64_t>{3, 4}));
  EXPECT_EQ(init::calculateFanInAndFanOut(zeros({4, 3, 5, 2})), (std::pair<int64_t, int64_t>{30, 40}));
  EXPECT_EQ(errorOf([] { init::calculateFanInAndFanOut(zeros({4})); }),
            "calculateFanInAndFanOut: fan in and fan out need a tensor of at least 2 dims, got f32[4]@cpu");
}

TEST(NnInit, KaimingUniformBoundsAreExact) {
  Generator gen(3);
  Tensor w = zeros({kRows, kCols});
  // relu, fan_in = 200: bound = √2 · √(3 / 200).
  init::kaimingUniform_(w, 0.0, init::FanMode::fanIn, init::Nonlinearity::relu, gen);
  expectUniform(w, std::sqrt(2.0) * std::sqrt(3.0 / kCols));
  // fan_out = 500.
  init::kaimingUniform_(w, 0.0, init::FanMode::fanOut, init::Nonlinearity::relu, gen);
  expectUniform(w, std::sqrt(2.0) * std::sqrt(3.0 / kRows));
  // PyTorch's default (leaky_relu, a = 0): gain √2 as well; Linear's a = √5: bound 1 / √fan_in.
  init::kaimingUniform_(w, std::sqrt(5.0), init::FanMode::fanIn, init::Nonlinearity::leakyRelu, gen);
  expectUniform(w, 1.0 / std::sqrt(static_cast<double>(kCols)));
  // A receptive field: [50, 20, 10, 10] has fan_in 20 · 100.
  Tensor conv = zeros({50, 20, 10, 10});
  init::kaimingUniform_(conv, 0.0, init::FanMode::fanIn, init::Nonlinearity::tanh, gen);
  expectUniform(conv, 5.0 / 3 * std::sqrt(3.0 / 2000));
}

TEST(NnInit, KaimingNormalStd) {
  Generator gen(4);
  Tensor w = zeros({kRows, kCols});
  init::kaimingNormal_(w, 0.0, init::FanMode::fanIn, init::Nonlinearity::relu, gen);
  expectNormal(w, 0.0, std::sqrt(2.0) / std::sqrt(200.0));
  init::kaimingNormal_(w, 0.2, init::FanMode::fanOut, init::Nonlinearity::leakyRelu, gen);
  expectNormal(w, 0.0, std::sqrt(2.0 / 1.04) / std::sqrt(500.0));
}

TEST(NnInit, XavierBoundsAndStd) {
  Generator gen(5);
  Tensor w = zeros({kRows, kCols});
  init::xavierUniform_(w, 1.0, gen);
  expectUniform(w, std::sqrt(6.0 / (kRows + kCols)));
  init::xavierUniform_(w, 5.0 / 3, gen);
  expectUniform(w, 5.0 / 3 * std::sqrt(6.0 / (kRows + kCols)));
  init::xavierNormal_(w, 2.0, gen);
  expectNormal(w, 0.0, 2.0 * std::sqrt(2.0 / (kRows + kCols)));
}

TEST(NnInit, SameGeneratorStateSameValues) {
  Tensor a = zeros({3, 4}), b = zeros({3, 4});
  Generator g1(42), g2(42);
  init::xavierNormal_(a, 1.0, g1);
  init::xavierNormal_(b, 1.0, g2);
  EXPECT_EQ(a.toVector(), b.toVector());
  init::xavierNormal_(b, 1.0, g2);  // the next draw differs
  EXPECT_NE(a.toVector(), b.toVector());
}

TEST(NnInit, Errors) {
  Tensor v = zeros({4});
  EXPECT_EQ(errorOf([&] { init::kaimingUniform_(v); }),
            "kaimingUniform_: fan in and fan out need a tensor of at least 2 dims, got f32[4]@cpu");
  EXPECT_EQ(errorOf([&] { init::xavierNormal_(v); }),
            "xavierNormal_: fan in and fan out need a tensor of at least 2 dims, got f32[4]@cpu");
  EXPECT_EQ(errorOf([&] { init::uniform_(v, 1.0, 0.0); }), "uniform_: expected finite bounds a <= b, got a=1, b=0");
  EXPECT_EQ(errorOf([&] { init::normal_(v, 0.0, -1.0); }),
            "normal_: expected a finite mean and a finite std >= 0, got mean=0, std=-1");
  EXPECT_EQ(errorOf([&] { init::normal_(zeros({2}, DType::i32)); }),
            "normal_: expected a floating-point tensor, got i32[2]@cpu");
  EXPECT_EQ(errorOf([&] { init::zeros_(Tensor()); }), "constant_: use of an undefined tensor");
  // Empty weights are left alone, as in PyTorch.
  Tensor empty = zeros({0, 3});
  EXPECT_EQ(init::kaimingUniform_(empty).numel(), 0);
  EXPECT_EQ(init::xavierUniform_(empty).numel(), 0);
}

}  // namespace
}  // namespace kiln
