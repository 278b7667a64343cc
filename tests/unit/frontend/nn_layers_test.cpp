// The layers of kiln::nn: their parameters (names, shapes, initial values
// as PyTorch's), their forward against the functions they call, written
// out here, and their errors.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

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

TEST(NnLayers, ReLUHasNoParameters) {
  nn::ReLU relu;
  EXPECT_TRUE(relu->parameters().empty());
  EXPECT_EQ(relu(fromVector({-1, 0, 2})).toVector(), (std::vector<float>{0, 0, 2}));
}

}  // namespace
}  // namespace kiln
