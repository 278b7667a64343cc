// optim::SGD (frontend/optim/sgd.h), following _single_tensor_sgd in
// torch/optim/sgd.py step by step, so that results round as PyTorch's do
// (up to PyTorch's fused multiply-adds, docs/nn.md).
#include "frontend/optim/sgd.h"

#include <fmt/format.h>

#include <cmath>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/per_call.h"
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
  for (size_t gi = 0; gi < paramGroups().size(); ++gi) {
    const bool decay = *paramGroups()[gi].weightDecay != 0;
    // Inside kiln::compile the update's shape depends on this (Note [Guards]).
    kiln::detail::guardHost(fmt::format("SGD group {} has {} weight decay", gi, decay ? "a nonzero" : "no"),
                            [this, gi, decay] { return (*paramGroups()[gi].weightDecay != 0) == decay; });
    for (const Tensor& param : paramGroups()[gi].params) {
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      // -lr and the weight decay, read at every step, also when the step is
      // compiled, so that a scheduler's lr takes effect (Note [Per-call values]).
      const ir::TensorType scalar{param.dtype(), {}, param.device()};
      const std::vector<Tensor> k =
          kiln::detail::perCall({{"sgd_neg_lr", scalar}, {"sgd_weight_decay", scalar}}, [this, gi, scalar] {
            return std::vector<Tensor>{
                full({}, -*paramGroups()[gi].lr, scalar.dtype, Device::cpu()),  // moved or uploaded by perCall
                full({}, *paramGroups()[gi].weightDecay, scalar.dtype, Device::cpu())};
          });
      if (decay) grad = add(grad, mul(param, k[1]));  // grad.add(param, alpha=weight_decay)
      if (momentum != 0) {
        Tensor& buf = momentumBuffers_[param.impl()];
        const bool first = !buf.defined();
        kiln::detail::guardHost(
            fmt::format("the SGD momentum buffer of {} is {}", param.str(), first ? "not made yet" : "made"),
            [this, impl = param.impl(), first] {
              auto it = momentumBuffers_.find(impl);
              return (it != momentumBuffers_.end() && it->second.defined()) != first;
            });
        if (first) {
          buf = zeros(grad.shape(), grad.dtype(), grad.device());  // eager, also inside a trace
          buf.copy_(grad);                                         // torch.clone(grad)
        } else {
          buf.mul_(momentum).add_(grad, 1 - options_.dampening);
        }
        grad = options_.nesterov ? add(grad, mul(buf, momentum)) : buf;
      }
      param.add_(mul(grad, k[0]));  // p.add_(grad, alpha=-lr)
    }
  }
}

Tensor SGD::momentumBuffer(const Tensor& param) const {
  auto it = momentumBuffers_.find(param.impl());
  return it == momentumBuffers_.end() ? Tensor() : it->second;
}

// State dicts (Optimizer::stateDict): PyTorch's name.
std::vector<std::pair<std::string, Tensor>> SGD::paramState(const Tensor& param) const {
  const Tensor buf = momentumBuffer(param);
  if (!buf.defined()) return {};
  return {{"momentum_buffer", buf}};
}

void SGD::setParamState(const Tensor& param, const std::map<std::string, Tensor>& entries) {
  NoGradGuard noGrad;
  if (entries.empty()) {
    momentumBuffers_.erase(param.impl());
    return;
  }
  Tensor& buf = momentumBuffers_[param.impl()];
  if (!buf.defined() || buf.shape() != param.shape() || buf.dtype() != param.dtype())
    buf = zeros(param.shape(), param.dtype(), param.device());
  buf.copy_(entries.at("momentum_buffer"));  // in place: a compiled step may have captured it
}

}  // namespace kiln::optim
