// amp::GradScaler (frontend/amp/grad_scaler.h), as torch/amp/grad_scaler.py:
// the inf/NaN check reads one number per gradient back to the host (the
// largest |element|, which is inf or NaN exactly when one element is),
// where PyTorch reads one flag per device.
#include "frontend/amp/grad_scaler.h"

#include <cmath>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln::amp {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.initScale) {
  KILN_CHECK(options.initScale > 0 && std::isfinite(options.initScale),
             "GradScaler: initScale must be positive and finite, got {}", options.initScale);
  KILN_CHECK(options.growthFactor > 1.0, "GradScaler: growthFactor must be > 1, got {}", options.growthFactor);
  KILN_CHECK(options.backoffFactor > 0.0 && options.backoffFactor < 1.0,
             "GradScaler: backoffFactor must be in (0, 1), got {}", options.backoffFactor);
  KILN_CHECK(options.growthInterval > 0, "GradScaler: growthInterval must be positive, got {}", options.growthInterval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!options_.enabled) return loss;
  return mul(loss, scale_);
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  KILN_CHECK(!foundInf_.count(&optimizer),
             "GradScaler: unscale_() has already been called on this optimizer since the last update()");
  NoGradGuard noGrad;
  const double inverse = 1.0 / scale_;
  bool found = false;
  for (const optim::ParamGroup& g : optimizer.paramGroups())
    for (const Tensor& p : g.params) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      grad.mul_(inverse);
      const double largest = amax(abs(grad)).to(DType::f64).item<double>();
      found = found || !std::isfinite(largest);
    }
  foundInf_[&optimizer] = found;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  if (!foundInf_.count(&optimizer)) unscale_(optimizer);
  if (foundInf_.at(&optimizer)) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  KILN_CHECK(!foundInf_.empty(), "GradScaler: update() without a step() or unscale_() since the last update(): no "
                                 "inf/NaN check was recorded");
  bool found = false;
  for (const auto& [opt, inf] : foundInf_) found = found || inf;
  if (found) {
    scale_ *= options_.backoffFactor;
    growthTracker_ = 0;
  } else if (++growthTracker_ == options_.growthInterval) {
    scale_ *= options_.growthFactor;
    growthTracker_ = 0;
  }
  foundInf_.clear();
}

nn::OrderedDict<Tensor> GradScaler::stateDict() const {
  nn::OrderedDict<Tensor> d;
  d.insert("scale", full({}, scale_, DType::f64, Device::cpu()));
  d.insert("growth_tracker", fromVector(std::vector<int64_t>{growthTracker_}, Shape{}, Device::cpu()));
  return d;
}

void GradScaler::loadStateDict(const nn::OrderedDict<Tensor>& dict) {
  KILN_CHECK(dict.size() == 2 && dict.contains("scale") && dict.contains("growth_tracker"),
             "GradScaler: loadStateDict: expected scale and growth_tracker, got {} entries", dict.size());
  const double scale = dict.at("scale").to(DType::f64).item<double>();
  KILN_CHECK(scale > 0 && std::isfinite(scale), "GradScaler: loadStateDict: scale {} is not positive and finite", scale);
  scale_ = scale;
  growthTracker_ = dict.at("growth_tracker").to(DType::i64).item<int64_t>();
  foundInf_.clear();
}

}  // namespace kiln::amp
