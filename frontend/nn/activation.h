// Activation modules: nn::ReLU, nn::GELU and nn::Softplus, as torch.nn's;
// they hold no parameters and call kiln::relu, kiln::gelu and kiln::softplus.
#pragma once

#include <string>

#include "frontend/nn/module.h"

namespace kiln::nn {

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};
KILN_MODULE(ReLU);

class GELUImpl : public Module {
 public:
  /// `approximate`: "none" (x/2 (1 + erf(x/√2))) or "tanh" (the tanh
  /// approximation), as torch.nn.GELU.
  explicit GELUImpl(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;

  const std::string approximate;
};
KILN_MODULE(GELU);

class SoftplusImpl : public Module {
 public:
  /// log(1 + exp(beta x)) / beta, x where beta x > threshold, as torch.nn.Softplus.
  explicit SoftplusImpl(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& input) override;

  const double beta, threshold;
};
KILN_MODULE(Softplus);

}  // namespace kiln::nn
