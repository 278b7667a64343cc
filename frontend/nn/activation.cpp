// nn::ReLU, nn::GELU and nn::Softplus (frontend/nn/activation.h).
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

SoftplusImpl::SoftplusImpl(double beta_, double threshold_) : Module("Softplus"), beta(beta_), threshold(threshold_) {}

Tensor SoftplusImpl::forward(const Tensor& input) { return softplus(input, beta, threshold); }

}  // namespace kiln::nn
