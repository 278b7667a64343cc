// Activation modules: nn::ReLU and nn::GELU, as torch.nn.ReLU and
// torch.nn.GELU; they hold no parameters and call kiln::relu and kiln::gelu.
#pragma once

#include "frontend/nn/module.h"

namespace kiln::nn {

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};
KILN_MODULE(ReLU);

}  // namespace kiln::nn
