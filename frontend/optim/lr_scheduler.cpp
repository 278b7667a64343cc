// Learning-rate schedules (frontend/optim/lr_scheduler.h), following
// torch/optim/lr_scheduler.py's get_lr() of each, expression by expression,
// so that the lrs equal PyTorch's (both compute in doubles with the C
// library's cos).
#include "frontend/optim/lr_scheduler.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "frontend/ops.h"
#include "runtime/error.h"

namespace kiln::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (ParamGroup& g : optimizer_.paramGroups()) {
    if (!g.initialLr) g.initialLr = *g.lr;
    baseLrs_.push_back(*g.initialLr);
  }
}

void LRScheduler::initialStep() {
  initial_ = true;
  step();
  initial_ = false;
}

std::vector<double> LRScheduler::groupLrs() const {
  std::vector<double> lrs;
  for (const ParamGroup& g : optimizer_.paramGroups()) lrs.push_back(*g.lr);
  return lrs;
}

void LRScheduler::step() {
  auto& groups = optimizer_.paramGroups();
  KILN_CHECK(baseLrs_.size() == groups.size(),
             "LRScheduler: the optimizer has {} parameter groups, but the scheduler was made for {} (add groups "
             "before making the scheduler)",
             groups.size(), baseLrs_.size());
  ++lastEpoch_;
  std::vector<double> lrs = computeLr();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = lrs[i];
  lastLr_ = std::move(lrs);
}

StepLR::StepLR(Optimizer& optimizer, int64_t stepSize, double gamma)
    : LRScheduler(optimizer), stepSize_(stepSize), gamma_(gamma) {
  KILN_CHECK(stepSize > 0, "StepLR: stepSize must be positive, got {}", stepSize);
  initialStep();
}

std::vector<double> StepLR::computeLr() {
  std::vector<double> lrs = groupLrs();
  if (lastEpoch_ == 0 || lastEpoch_ % stepSize_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t tMax, double etaMin)
    : LRScheduler(optimizer), tMax_(tMax), etaMin_(etaMin) {
  KILN_CHECK(tMax > 0, "CosineAnnealingLR: tMax must be positive, got {}", tMax);
  initialStep();
}

std::vector<double> CosineAnnealingLR::computeLr() {
  std::vector<double> lrs = groupLrs();
  if (initial_) return lrs;
  constexpr double pi = std::numbers::pi;
  const double t = static_cast<double>(lastEpoch_), tMax = static_cast<double>(tMax_);
  if ((lastEpoch_ - 1 - tMax_) % (2 * tMax_) == 0) {
    for (size_t i = 0; i < lrs.size(); ++i) lrs[i] = lrs[i] + (baseLrs_[i] - etaMin_) * (1 - std::cos(pi / tMax)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(pi * t / tMax)) / (1 + std::cos(pi * (t - 1) / tMax)) * (lr - etaMin_) + etaMin_;
  return lrs;
}

LinearLR::LinearLR(Optimizer& optimizer, double startFactor, double endFactor, int64_t totalIters)
    : LRScheduler(optimizer), startFactor_(startFactor), endFactor_(endFactor), totalIters_(totalIters) {
  KILN_CHECK(startFactor > 0 && startFactor <= 1, "LinearLR: startFactor must be greater than 0 and at most 1, got {}",
             startFactor);
  KILN_CHECK(endFactor >= 0 && endFactor <= 1, "LinearLR: endFactor must be between 0 and 1, got {}", endFactor);
  KILN_CHECK(totalIters > 0, "LinearLR: totalIters must be positive, got {}", totalIters);
  initialStep();
}

std::vector<double> LinearLR::computeLr() {
  std::vector<double> lrs = groupLrs();
  if (lastEpoch_ == 0) {
    for (double& lr : lrs) lr *= startFactor_;
    return lrs;
  }
  if (initial_ || lastEpoch_ > totalIters_) return lrs;
  const double factor =
      1.0 + (endFactor_ - startFactor_) / (static_cast<double>(totalIters_) * startFactor_ +
                                           static_cast<double>(lastEpoch_ - 1) * (endFactor_ - startFactor_));
  for (double& lr : lrs) lr *= factor;
  return lrs;
}

nn::OrderedDict<Tensor> LRScheduler::stateDict() const {
  nn::OrderedDict<Tensor> d;
  d.insert("last_epoch", fromVector(std::vector<int64_t>{lastEpoch_}, Shape{}, Device::cpu()));
  for (size_t g = 0; g < baseLrs_.size(); ++g)
    d.insert(fmt::format("base_lrs.{}", g), full({}, baseLrs_[g], DType::f64, Device::cpu()));
  for (size_t g = 0; g < lastLr_.size(); ++g)
    d.insert(fmt::format("last_lr.{}", g), full({}, lastLr_[g], DType::f64, Device::cpu()));
  return d;
}

void LRScheduler::loadStateDict(const nn::OrderedDict<Tensor>& dict) {
  const size_t groups = baseLrs_.size();
  KILN_CHECK(dict.size() == 1 + 2 * groups && dict.contains("last_epoch"),
             "LRScheduler: loadStateDict: expected last_epoch and base_lrs/last_lr for {} groups ({} entries), got {} "
             "entries",
             groups, 1 + 2 * groups, dict.size());
  std::vector<double> base(groups), last(groups);
  for (size_t g = 0; g < groups; ++g) {
    const Tensor* b = dict.find(fmt::format("base_lrs.{}", g));
    const Tensor* l = dict.find(fmt::format("last_lr.{}", g));
    KILN_CHECK(b && l, "LRScheduler: loadStateDict: no base_lrs.{0} or last_lr.{0} (the optimizer has {1} groups)", g,
               groups);
    base[g] = b->to(DType::f64).item<double>();
    last[g] = l->to(DType::f64).item<double>();
  }
  lastEpoch_ = dict.at("last_epoch").to(DType::i64).item<int64_t>();
  baseLrs_ = std::move(base);
  lastLr_ = std::move(last);
}

}  // namespace kiln::optim
