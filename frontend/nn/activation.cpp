// nn::ReLU and nn::GELU (frontend/nn/activation.h).
#include "frontend/nn/activation.h"

#include "frontend/ops.h"

namespace kiln::nn {

Tensor ReLUImpl::forward(const Tensor& input) { return relu(input); }

}  // namespace kiln::nn
