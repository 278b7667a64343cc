// nn::Dropout (frontend/nn/dropout.h).
#include "frontend/nn/dropout.h"

#include "frontend/dropout.h"
#include "runtime/error.h"

namespace kiln::nn {

DropoutImpl::DropoutImpl(double p_) : Module("Dropout"), p(p_) {
  KILN_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got {}", p);
}

DropoutImpl::DropoutImpl(double p_, Generator generator) : DropoutImpl(p_) { generator_ = std::move(generator); }

Tensor DropoutImpl::forward(const Tensor& input) {
  return dropout(input, p, isTraining(), generator_ ? *generator_ : defaultGenerator());
}

}  // namespace kiln::nn
