// nn::Linear, as torch.nn.Linear: y = x · weightᵀ + bias (kiln::linear),
// with PyTorch's initialization: weight ~ kaimingUniform_(a = √5), which is
// U(-1/√in, 1/√in), and bias ~ U(-1/√in, 1/√in).
#pragma once

#include <cstdint>

#include "frontend/nn/module.h"

namespace kiln::nn {

class LinearImpl : public Module {
 public:
  /// Parameters "weight" [outFeatures, inFeatures] and, with `bias`,
  /// "bias" [outFeatures], in f32, drawn from the default generator.
  LinearImpl(int64_t inFeatures, int64_t outFeatures, bool bias = true);

  /// Draws weight and bias anew, as PyTorch's reset_parameters.
  void resetParameters(Generator& generator = defaultGenerator());
  /// input [..., inFeatures] to [..., outFeatures].
  Tensor forward(const Tensor& input) override;

  const int64_t inFeatures;
  const int64_t outFeatures;
  Tensor weight;  ///< [outFeatures, inFeatures]
  Tensor bias;    ///< [outFeatures]; undefined without bias
};
KILN_MODULE(Linear);

}  // namespace kiln::nn
