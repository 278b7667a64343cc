// nn::ReLU and nn::GELU (frontend/nn/activation.h).
#include "frontend/nn/activation.h"

#include "frontend/ops.h"
#include "runtime/error.h"

namespace kiln::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return relu(input); }

GELUImpl::GELUImpl(std::string approximate_) : Module("GELU"), approximate(std::move(approximate_)) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "GELU: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
}

Tensor GELUImpl::forward(const Tensor& input) { return gelu(input, approximate); }

}  // namespace kiln::nn
