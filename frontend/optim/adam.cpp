// optim::Adam and optim::AdamW (frontend/optim/adam.h), following
// _single_tensor_adam in torch/optim/adam.py step by step (the non-capturable
// branch), so that results round as PyTorch's do up to PyTorch's fused
// multiply-adds (docs/nn.md).
#include "frontend/optim/adam.h"

#include <fmt/format.h>

#include <cmath>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/per_call.h"
#include "runtime/error.h"

namespace kiln::optim {

namespace {

void checkOptions(const char* name, const AdamOptions& o) {
  KILN_CHECK(o.eps >= 0 && std::isfinite(o.eps), "{}: invalid eps {}", name, o.eps);
  KILN_CHECK(o.beta1 >= 0 && o.beta1 < 1, "{}: invalid beta1 {} (expected 0 <= beta1 < 1)", name, o.beta1);
  KILN_CHECK(o.beta2 >= 0 && o.beta2 < 1, "{}: invalid beta2 {} (expected 0 <= beta2 < 1)", name, o.beta2);
}

std::vector<ParamGroup> oneGroup(std::vector<Tensor> params) {
  std::vector<ParamGroup> groups(1);
  groups[0].params = std::move(params);
  return groups;
}

AdamOptions fromAdamW(const AdamWOptions& o) { return {o.lr, o.beta1, o.beta2, o.eps, o.weightDecay, o.amsgrad}; }

/// torch.lerp(start, end, weight) with a scalar weight, as ATen's CPU
/// kernel computes it: start + weight * (end - start) when |weight| < 0.5,
/// else end - (end - start) * (1 - weight).
Tensor lerp(const Tensor& start, const Tensor& end, double weight) {
  Tensor diff = sub(end, start);
  return std::abs(weight) < 0.5 ? add(start, mul(diff, weight)) : sub(end, mul(diff, 1 - weight));
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Adam(oneGroup(std::move(params)), options) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", std::move(groups), options, false) {}

Adam::Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupledWeightDecay)
    : Optimizer(name, std::move(groups), options.lr, options.weightDecay),
      options_(options),
      decoupledWeightDecay_(decoupledWeightDecay) {
  checkOptions(name, options_);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : AdamW(oneGroup(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Adam("AdamW", std::move(groups), fromAdamW(options), true) {}

void Adam::step() {
  NoGradGuard noGrad;
  const double beta1 = options_.beta1, beta2 = options_.beta2, eps = options_.eps;
  for (size_t gi = 0; gi < paramGroups().size(); ++gi) {
    const bool decay = *paramGroups()[gi].weightDecay != 0;
    // Inside kiln::compile the update's shape depends on this (Note [Guards]).
    kiln::detail::guardHost(fmt::format("{} group {} has {} weight decay", name_, gi, decay ? "a nonzero" : "no"),
                            [this, gi, decay] { return (*paramGroups()[gi].weightDecay != 0) == decay; });
    for (const Tensor& param : paramGroups()[gi].params) {
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      AdamParamState& s = state_[param.impl()];
      if (!s.expAvg.defined()) {  // factories make eager tensors, also inside a trace
        s.expAvg = zeros(param.shape(), param.dtype(), param.device());
        s.expAvgSq = zeros(param.shape(), param.dtype(), param.device());
        if (options_.amsgrad) s.maxExpAvgSq = zeros(param.shape(), param.dtype(), param.device());
      }
      // What PyTorch computes as Python floats from the step count and the
      // group's lr, computed on the host at every step, also when the step
      // is compiled (Note [Per-call values]): the weight-decay factor,
      // -stepSize and sqrt(biasCorrection2), as scalars of param's dtype.
      const ir::TensorType scalar{param.dtype(), {}, param.device()};
      const std::vector<Tensor> k = kiln::detail::perCall(
          {{"adam_decay", scalar}, {"adam_neg_step_size", scalar}, {"adam_bias_correction2_sqrt", scalar}},
          [this, gi, &s, scalar, beta1, beta2] {
            const double lr = *paramGroups()[gi].lr, weightDecay = *paramGroups()[gi].weightDecay;
            const int64_t step = ++s.step;
            const double biasCorrection1 = 1 - std::pow(beta1, static_cast<double>(step));
            const double biasCorrection2 = 1 - std::pow(beta2, static_cast<double>(step));
            const double stepSize = lr / biasCorrection1;
            const double biasCorrection2Sqrt = std::pow(biasCorrection2, 0.5);  // Python's ** 0.5
            const double decayFactor = decoupledWeightDecay_ ? 1 - lr * weightDecay : weightDecay;
            // On the host: moved or uploaded by perCall (frontend/per_call.h).
            return std::vector<Tensor>{full({}, decayFactor, scalar.dtype, Device::cpu()),
                                       full({}, -stepSize, scalar.dtype, Device::cpu()),
                                       full({}, biasCorrection2Sqrt, scalar.dtype, Device::cpu())};
          });
      if (decay) {
        if (decoupledWeightDecay_)
          param.mul_(k[0]);  // p *= 1 - lr * weight_decay
        else
          grad = add(grad, mul(param, k[0]));  // grad.add(param, alpha=weight_decay)
      }
      s.expAvg.copy_(lerp(s.expAvg, grad, 1 - beta1));
      s.expAvgSq.mul_(beta2).add_(mul(mul(grad, 1 - beta2), grad));  // addcmul_(grad, grad, value=1 - beta2)
      Tensor v = s.expAvgSq;
      if (options_.amsgrad) {
        s.maxExpAvgSq.copy_(maximum(s.maxExpAvgSq, s.expAvgSq));
        v = s.maxExpAvgSq;
      }
      Tensor denom = add(div(sqrt(v), k[2]), eps);
      param.add_(div(mul(s.expAvg, k[1]), denom));  // addcdiv_(exp_avg, denom, value=-step_size)
    }
  }
}

const AdamParamState* Adam::state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

// State dicts (Optimizer::stateDict): PyTorch's names.
std::vector<std::pair<std::string, Tensor>> Adam::paramState(const Tensor& param) const {
  auto it = state_.find(param.impl());
  if (it == state_.end() || !it->second.expAvg.defined()) return {};
  const AdamParamState& s = it->second;
  std::vector<std::pair<std::string, Tensor>> out = {
      {"step", fromVector(std::vector<int64_t>{s.step}, Shape{}, Device::cpu())},
      {"exp_avg", s.expAvg},
      {"exp_avg_sq", s.expAvgSq}};
  if (options_.amsgrad) out.emplace_back("max_exp_avg_sq", s.maxExpAvgSq);
  return out;
}

std::vector<std::string> Adam::paramStateNames() const {
  std::vector<std::string> names = {"step", "exp_avg", "exp_avg_sq"};
  if (options_.amsgrad) names.push_back("max_exp_avg_sq");
  return names;
}

namespace {
/// `dst` holding `src`'s values: copied into it in place when it exists
/// with param's type (a compiled step may have captured it), else a new
/// tensor like param.
void restore(Tensor& dst, const Tensor& src, const Tensor& param) {
  NoGradGuard noGrad;
  if (dst.defined() && dst.shape() == param.shape() && dst.dtype() == param.dtype()) {
    dst.copy_(src);
  } else {
    dst = zeros(param.shape(), param.dtype(), param.device());
    dst.copy_(src);
  }
}
}  // namespace

void Adam::setParamState(const Tensor& param, const std::map<std::string, Tensor>& entries) {
  if (entries.empty()) {
    state_.erase(param.impl());
    return;
  }
  AdamParamState& s = state_[param.impl()];
  s.step = entries.at("step").to(DType::i64).item<int64_t>();
  restore(s.expAvg, entries.at("exp_avg"), param);
  restore(s.expAvgSq, entries.at("exp_avg_sq"), param);
  if (options_.amsgrad) restore(s.maxExpAvgSq, entries.at("max_exp_avg_sq"), param);
}

}  // namespace kiln::optim
