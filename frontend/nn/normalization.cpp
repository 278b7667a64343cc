// nn::LayerNorm (frontend/nn/normalization.h).
#include "frontend/nn/normalization.h"

#include "frontend/nn/init.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln::nn {

LayerNormImpl::LayerNormImpl(Shape normalizedShape_, double eps_, bool elementwiseAffine, bool bias_)
    : Module("LayerNorm"), normalizedShape(std::move(normalizedShape_)), eps(eps_) {
  KILN_CHECK(!normalizedShape.empty(), "LayerNorm: normalizedShape is empty");
  for (int64_t d : normalizedShape)
    KILN_CHECK(d > 0, "LayerNorm: normalizedShape {} has a size that is not positive", ir::shapeStr(normalizedShape));
  KILN_CHECK(eps >= 0, "LayerNorm: eps must be >= 0, got {}", eps);
  if (elementwiseAffine) {
    weight = registerParameter("weight", ones(normalizedShape));
    if (bias_) bias = registerParameter("bias", zeros(normalizedShape));
  }
}

void LayerNormImpl::resetParameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) { return layerNorm(input, normalizedShape, weight, bias, eps); }

}  // namespace kiln::nn
