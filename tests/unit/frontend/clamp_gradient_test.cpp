// clamp's gradients against PyTorch 2.x at the corners (Note [Clamp
// gradients] in frontend/ops.cpp): number bounds give x the gradient only
// strictly inside them; tensor bounds split it at ties between x and the
// bound; one tensor bound is maximum's or minimum's gradient; and min > max,
// NaN inputs and NaN bounds, each bound left out, clamp_ in place and kiln's
// mixed tensor-and-number call. Eager, and compiled == eager bit for bit.
//
// Every x, min and max runs over kValues = {-inf, -1, 0, 1, inf, NaN}, and
// the expected gradients (for an upstream of ones) were made with PyTorch
// 2.15.0 (CPU), written as digits: 2 * gradient, one per case, the cases in
// itertools.product order (x outermost, then min, then max):
//   P = list(itertools.product(V, V, V))            # V = kValues
//   x, lo, hi = (torch.tensor([p[k] for p in P], requires_grad=True) for k in range(3))
//   torch.clamp(x, lo, hi).backward(torch.ones(len(P)))   # kTensorX/Min/Max
// and likewise for the other tables (each says its torch call).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace {

using namespace kiln;
using detail::Operand;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const std::vector<float> kValues = {-kInf, -1, 0, 1, kInf, kNaN};

// torch.clamp(x, lo, hi) with tensor bounds: the gradients of x, lo and hi.
const std::string kTensorX =
    "21111200000000000000000000000022222201222202111200000000000000000002222200122200122200211200000000000000222200"
    "0122000122000122000212000000000222000012000012000012000012000022000022222222222222222222222222222222222222";
const std::string kTensorMin =
    "01111002222000222000022000002000000000000000111000222000022000002000000000000000000000011000022000002000000000"
    "0000000000000000000010000020000000000000000000000000000000000000000000000000000000000000000000000000000000";
const std::string kTensorMax =
    "00000020000022000022200022220000000021000020000022000022200022220000000022100022100022000022200022220000000022"
    "2100222100222100222000222200000000222210222210222210222210222200000000000000200000220000222000222200000000";
// torch.clamp(x, a, b) with number bounds a and b over kValues and None
// (product order, a outermost, (None, None) left out), x = kValues: x's gradient.
const std::string kNumberX =
    "00000000000002000002200002220000000002222000000000000000000000200000220000000000222000000000000000000000000000"
    "02000000000002200000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000"
    "00000000000000000000000000000000000000200000220000222000222200000000";
// torch.clamp(x, min=b) and torch.clamp(x, max=b), x and b 1-element
// tensors over kValues (product order, x outermost): x's and b's gradient.
const std::string kMinOnly = "110202020222201102020222202011020222202020110222202020201122222222222222";
const std::string kMaxOnly = "112020202022021120202022020211202022020202112022020202021122222222222222";

/// The gradients a table holds, from `at` on, `count` of them.
std::vector<float> gradients(const std::string& digits, size_t at, size_t count) {
  std::vector<float> g;
  for (size_t i = at; i < at + count; ++i) g.push_back(static_cast<float>(digits.at(i) - '0') / 2);
  return g;
}

/// Equal values (no gradient in the tables is NaN; the sign of zero is not
/// compared).
void expectGradients(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  const std::vector<float> g = got.toVector();
  ASSERT_EQ(g.size(), want.size()) << what;
  int shown = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i] != want[i] && shown++ < 8)
      ADD_FAILURE() << what << " element " << i << ": " << g[i] << ", PyTorch " << want[i];
}

/// The 216 cases of the tensor table: x, min and max as three tensors.
std::vector<Tensor> tensorGrid() {
  std::vector<float> x, lo, hi;
  for (float a : kValues)
    for (float b : kValues)
      for (float c : kValues) x.push_back(a), lo.push_back(b), hi.push_back(c);
  return {fromVector(x), fromVector(lo), fromVector(hi)};
}

std::vector<Tensor> clampTensorBackward(const std::vector<Tensor>& in) {
  Tensor x = in[0].detach().setRequiresGrad(), lo = in[1].detach().setRequiresGrad(),
         hi = in[2].detach().setRequiresGrad();
  Tensor y = clamp(x, lo, hi);
  y.backward(ones(y.shape()));
  return {y, x.grad(), lo.grad(), hi.grad()};
}

TEST(ClampGradient, TensorBoundsSplitAtTiesAsPyTorch) {
  const std::vector<Tensor> out = clampTensorBackward(tensorGrid());
  expectGradients(out[1], gradients(kTensorX, 0, 216), "x");
  expectGradients(out[2], gradients(kTensorMin, 0, 216), "min");
  expectGradients(out[3], gradients(kTensorMax, 0, 216), "max");
}

TEST(ClampGradient, NumberBoundsAreZeroAtTheBoundsAsPyTorch) {
  std::vector<std::optional<Operand>> bounds;
  for (float v : kValues) bounds.emplace_back(Operand(v));
  bounds.emplace_back(std::nullopt);
  size_t at = 0;
  for (const auto& lo : bounds)
    for (const auto& hi : bounds) {
      if (!lo && !hi) continue;
      Tensor x = fromVector(kValues).setRequiresGrad();
      clamp(x, lo, hi).backward(ones({6}));
      expectGradients(
          x.grad(), gradients(kNumberX, at, 6),
          "min " + (lo ? std::to_string(lo->scalar) : "none") + " max " + (hi ? std::to_string(hi->scalar) : "none"));
      at += 6;
    }
  EXPECT_EQ(at, kNumberX.size());
}

TEST(ClampGradient, OneTensorBoundIsMaximumOrMinimumAsPyTorch) {
  size_t at = 0;
  for (float a : kValues)
    for (float b : kValues) {
      for (bool isMin : {true, false}) {
        Tensor x = fromVector({a}).setRequiresGrad(), bound = fromVector({b}).setRequiresGrad();
        (isMin ? clamp(x, bound, std::nullopt) : clamp(x, std::nullopt, bound)).backward(ones({1}));
        const std::string& table = isMin ? kMinOnly : kMaxOnly;
        const std::string what =
            std::string(isMin ? "min" : "max") + " only, x " + std::to_string(a) + " bound " + std::to_string(b);
        expectGradients(x.grad(), gradients(table, at, 1), what + ": x");
        expectGradients(bound.grad(), gradients(table, at + 1, 1), what + ": bound");
      }
      at += 2;
    }
}

TEST(ClampGradient, InPlaceAndMixedBounds) {
  // y = x * 1; y.clamp_(-1., 1.): x.grad = [0, 0, 1, 0, 0, 0].
  Tensor x = fromVector({-2, -1, 0, 1, 2, kNaN}).setRequiresGrad();
  Tensor y = x * 1.0;
  y.clamp_(-1.0, 1.0);
  y.backward(ones({6}));
  expectGradients(x.grad(), {0, 0, 1, 0, 0, 0}, "clamp_");
  // y.clamp_(max=1.): x.grad = [1, 1, 1, 0, 0, 0].
  Tensor x2 = fromVector({-2, -1, 0, 1, 2, kNaN}).setRequiresGrad();
  Tensor y2 = x2 * 1.0;
  y2.clamp_(std::nullopt, 1.0);
  EXPECT_EQ(y2.toVector()[4], 1.0f);
  y2.backward(ones({6}));
  expectGradients(x2.grad(), {1, 1, 1, 0, 0, 0}, "clamp_ max only");
  // kiln's clamp(x, tensor, number) is torch.clamp(x, lo, torch.tensor(1.)):
  // x.grad = [0, .5, 1, .5, 0, 1], lo.grad = [1, .5, 0, 0, 0, 0].
  Tensor x3 = fromVector({-2, -1, 0, 1, 2, kNaN}).setRequiresGrad();
  Tensor lo = full({6}, -1.0).setRequiresGrad();
  clamp(x3, lo, 1.0).backward(ones({6}));
  expectGradients(x3.grad(), {0, 0.5, 1, 0.5, 0, 1}, "mixed: x");
  expectGradients(lo.grad(), {1, 0.5, 0, 0, 0, 0}, "mixed: min");
}

TEST(ClampGradient, ForwardAndErrors) {
  // torch.clamp(torch.tensor([5.]), 3., 1.) and with tensor bounds: 1; one side only.
  EXPECT_EQ(clamp(fromVector({5}), 3, 1).item(), 1.0f);
  EXPECT_EQ(clamp(fromVector({5}), fromVector({3}), fromVector({1})).item(), 1.0f);
  EXPECT_EQ(clamp(fromVector({-5, 5}), 0, std::nullopt).toVector(), (std::vector<float>{0, 5}));
  EXPECT_EQ(clamp(fromVector({-5, 5}), std::nullopt, 0).toVector(), (std::vector<float>{-5, 0}));
  EXPECT_TRUE(std::isnan(clamp(fromVector({kNaN}), std::nullopt, 0).item()));
  EXPECT_EQ(errorOf([] { clamp(fromVector({1}), std::nullopt, std::nullopt); }),
            "clamp: expected a min or a max bound, got neither");
}

std::vector<uint32_t> bitsOf(const Tensor& t) {
  std::vector<uint32_t> bits;
  for (float f : t.toVector()) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

TEST(ClampGradient, CompiledEqualsEager) {
  const std::vector<Tensor> grid = tensorGrid();
  const std::vector<Tensor> eager = clampTensorBackward(grid);
  auto tensors = compile([](const std::vector<Tensor>& in) { return clampTensorBackward(in); });
  const std::vector<Tensor> out = tensors(grid[0], grid[1], grid[2]);
  ASSERT_EQ(out.size(), eager.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(bitsOf(out[i]), bitsOf(eager[i])) << "tensor bounds, result " << i;

  auto numbers = [](const std::vector<Tensor>& in) {
    Tensor x = in[0].detach().setRequiresGrad();
    Tensor y = clamp(x, -1.0, 1.0);
    y.backward(ones(y.shape()));
    return std::vector<Tensor>{y, x.grad()};
  };
  const std::vector<Tensor> eagerNumbers = numbers({grid[0]});
  const std::vector<Tensor> compiledNumbers = compile(numbers)(grid[0]);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(bitsOf(compiledNumbers[i]), bitsOf(eagerNumbers[i])) << "number bounds, result " << i;
}

}  // namespace
