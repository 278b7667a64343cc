// nn::LayerNorm, as torch.nn.LayerNorm: kiln::layerNorm over the last
// dims of its input, with a learnable per-element weight (ones) and bias
// (zeros) when elementwiseAffine.
#pragma once

#include <cstdint>

#include "frontend/nn/module.h"

namespace kiln::nn {

class LayerNormImpl : public Module {
 public:
  /// Normalizes over the last normalizedShape.size() dims, which must equal
  /// normalizedShape; `bias` false leaves the bias out (PyTorch's bias=False).
  explicit LayerNormImpl(Shape normalizedShape, double eps = 1e-5, bool elementwiseAffine = true, bool bias = true);
  explicit LayerNormImpl(int64_t normalizedShape, double eps = 1e-5, bool elementwiseAffine = true, bool bias = true)
      : LayerNormImpl(Shape{normalizedShape}, eps, elementwiseAffine, bias) {}

  /// Sets weight to ones and bias to zeros, as PyTorch's reset_parameters.
  void resetParameters();
  Tensor forward(const Tensor& input) override;

  const Shape normalizedShape;
  const double eps;
  Tensor weight;  ///< normalizedShape; undefined without elementwiseAffine
  Tensor bias;    ///< normalizedShape; undefined without elementwiseAffine or bias
};

/// A handle on a LayerNormImpl: `nn::LayerNorm ln({4, 8})`, `nn::LayerNorm ln(8)`.
class LayerNorm : public ModuleHolder<LayerNormImpl> {
 public:
  using ModuleHolder<LayerNormImpl>::ModuleHolder;
  // A braced shape cannot go through the variadic constructor (a braced list
  // has no type to deduce), so it has its own.
  explicit LayerNorm(Shape normalizedShape, double eps = 1e-5, bool elementwiseAffine = true, bool bias = true)
      : ModuleHolder(std::make_shared<LayerNormImpl>(std::move(normalizedShape), eps, elementwiseAffine, bias)) {}
};

}  // namespace kiln::nn
