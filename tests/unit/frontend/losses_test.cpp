// cross_entropy, nll_loss and mse_loss against PyTorch (the values and input
// gradients in tests/reference/functional/losses.json, written by
// tests/reference/make_loss_fixtures.py), gradcheck, compiled == eager, and
// errors.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "common/fixtures.h"
#include "common/source_dir.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

using testutil::JsonValue;

const JsonValue& field(const JsonValue& j, const std::string& name) {
  auto it = j.fields.find(name);
  if (it == j.fields.end()) throw std::runtime_error("losses.json: missing field " + name);
  return it->second;
}

Tensor tensorOf(const JsonValue& j) {
  if (j.kind == JsonValue::null) return {};
  Shape shape;
  for (const JsonValue& d : field(j, "shape").items) shape.push_back(static_cast<int64_t>(d.num));
  std::vector<double> data;
  for (const JsonValue& v : field(j, "data").items) data.push_back(v.num);
  if (field(j, "kind").str == "int") {
    std::vector<int64_t> ints(data.begin(), data.end());
    return fromVector(ints, shape);
  }
  return fromVector(data, shape).to(DType::f32);
}

Reduction reductionOf(const JsonValue& kwargs) {
  auto it = kwargs.fields.find("reduction");
  if (it == kwargs.fields.end() || it->second.str == "mean") return Reduction::mean;
  return it->second.str == "sum" ? Reduction::sum : Reduction::none;
}

double numberOr(const JsonValue& kwargs, const char* name, double fallback) {
  auto it = kwargs.fields.find(name);
  return it == kwargs.fields.end() ? fallback : it->second.num;
}

Tensor runLoss(const std::string& fn, const JsonValue& kwargs, const Tensor& x, const Tensor& target,
               const Tensor& weight) {
  const Reduction r = reductionOf(kwargs);
  const auto ignore = static_cast<int64_t>(numberOr(kwargs, "ignore_index", -100));
  if (fn == "cross_entropy") return crossEntropy(x, target, {weight, ignore, r, numberOr(kwargs, "label_smoothing", 0)});
  if (fn == "nll_loss") return nllLoss(x, target, {weight, ignore, r});
  if (fn == "mse_loss") return mseLoss(x, target, r);
  throw std::runtime_error("losses.json: unknown function " + fn);
}

/// |kiln - PyTorch| <= 2e-6 * max(1, |PyTorch|): log_softmax's exp and log are
/// within 1 ulp of PyTorch's, sums are in f64 (PyTorch's in f32).
void expectClose(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.toVector(), w = want.toVector();
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_LE(std::abs(g[i] - w[i]), 2e-6 * std::max(1.0f, std::abs(w[i])))
        << what << " element " << i << ": kiln " << g[i] << ", PyTorch " << w[i];
}

TEST(Losses, MatchPyTorch) {
  const JsonValue doc =
      testutil::loadJson((testutil::sourceDir() / "tests" / "reference" / "functional" / "losses.json").string());
  int cases = 0;
  for (const JsonValue& c : field(doc, "cases").items) {
    const std::string name = field(c, "name").str, fn = field(c, "fn").str;
    SCOPED_TRACE(name);
    Tensor x = tensorOf(field(c, "input")).setRequiresGrad();
    Tensor y = runLoss(fn, field(c, "kwargs"), x, tensorOf(field(c, "target")), tensorOf(field(c, "weight")));
    expectClose(y, tensorOf(field(c, "output")), name + " output");
    y.backward(tensorOf(field(c, "upstream")));
    expectClose(x.grad(), tensorOf(field(c, "grad_input")), name + " gradient");
    ++cases;
  }
  EXPECT_EQ(cases, 17);
}

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
