// nn::Linear (frontend/nn/linear.h).
#include "frontend/nn/linear.h"

#include <cmath>

#include "frontend/linalg.h"
#include "frontend/nn/init.h"
#include "runtime/error.h"

namespace kiln::nn {

LinearImpl::LinearImpl(int64_t inFeatures_, int64_t outFeatures_, bool bias_)
    : Module("Linear"), inFeatures(inFeatures_), outFeatures(outFeatures_) {
  KILN_CHECK(inFeatures >= 0 && outFeatures >= 0, "Linear: expected sizes >= 0, got inFeatures={}, outFeatures={}",
             inFeatures, outFeatures);
  weight = registerParameter("weight", zeros({outFeatures, inFeatures}));
  if (bias_) bias = registerParameter("bias", zeros({outFeatures}));
  resetParameters();
}

void LinearImpl::resetParameters(Generator& generator) {
  // kaiming_uniform_(a=√5): gain √(2 / (1 + 5)) = √(1/3), bound = √3 · gain / √in = 1 / √in.
  init::kaimingUniform_(weight, std::sqrt(5.0), init::FanMode::fanIn, init::Nonlinearity::leakyRelu, generator);
  if (bias.defined()) {
    const double bound = inFeatures > 0 ? 1.0 / std::sqrt(static_cast<double>(inFeatures)) : 0.0;
    init::uniform_(bias, -bound, bound, generator);
  }
}

Tensor LinearImpl::forward(const Tensor& input) { return linear(input, weight, bias); }

}  // namespace kiln::nn
