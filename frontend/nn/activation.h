// Activation modules: nn::ReLU and nn::GELU, as torch.nn.ReLU and
// torch.nn.GELU; they hold no parameters and call kiln::relu and kiln::gelu.
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

}  // namespace kiln::nn
