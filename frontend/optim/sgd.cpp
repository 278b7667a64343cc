// optim::SGD (frontend/optim/sgd.h), following _single_tensor_sgd in
// torch/optim/sgd.py step by step, so that results round as PyTorch's do
// (up to PyTorch's fused multiply-adds, docs/nn.md).
#include "frontend/optim/sgd.h"

#include <cmath>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "runtime/error.h"

namespace kiln::optim {

namespace {
void checkOptions(const SGDOptions& o) {
  KILN_CHECK(o.momentum >= 0 && std::isfinite(o.momentum), "SGD: invalid momentum {}", o.momentum);
  KILN_CHECK(std::isfinite(o.dampening), "SGD: invalid dampening {}", o.dampening);
  KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
             "SGD: Nesterov momentum requires a momentum > 0 and zero dampening, got momentum={}, dampening={}",
             o.momentum, o.dampening);
}

std::vector<ParamGroup> oneGroup(std::vector<Tensor> params) {
  std::vector<ParamGroup> groups(1);
  groups[0].params = std::move(params);
  return groups;
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : SGD(oneGroup(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), options.lr, options.weightDecay), options_(options) {
  checkOptions(options_);
}

void SGD::step() {
  NoGradGuard noGrad;
  const double momentum = options_.momentum;
  for (const ParamGroup& group : paramGroups()) {
    const double lr = *group.lr, weightDecay = *group.weightDecay;
    for (const Tensor& param : group.params) {
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      if (weightDecay != 0) grad = add(grad, mul(param, weightDecay));  // grad.add(param, alpha=weight_decay)
      if (momentum != 0) {
        Tensor& buf = momentumBuffers_[param.impl()];
        if (!buf.defined()) {
          buf = grad.clone();
        } else {
          buf.mul_(momentum).add_(grad, 1 - options_.dampening);
        }
        grad = options_.nesterov ? add(grad, mul(buf, momentum)) : buf;
      }
      param.add_(grad, -lr);
    }
  }
}

Tensor SGD::momentumBuffer(const Tensor& param) const {
  auto it = momentumBuffers_.find(param.impl());
  return it == momentumBuffers_.end() ? Tensor() : it->second;
}

}  // namespace kiln::optim
