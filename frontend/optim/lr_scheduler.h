// Learning-rate schedules, as torch.optim.lr_scheduler: StepLR,
// CosineAnnealingLR and LinearLR (linear warmup). A scheduler changes the
// `lr` of each of its optimizer's parameter groups; call step() once per
// epoch (or per iteration), after the optimizer's step():
//
//   optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   optim::CosineAnnealingLR cosine(opt, /*tMax=*/100);
//   for (int epoch = 0; epoch < 100; ++epoch) {
//     ... opt.step() per batch ...
//     cosine.step();
//   }
//
// Each computes the new lr from the group's current lr (PyTorch's
// "chainable" get_lr form, which is what PyTorch's step() uses), so that
// several schedulers on one optimizer compose as PyTorch's ChainedScheduler:
// a LinearLR warmup and a CosineAnnealingLR both stepped every iteration
// multiply their factors. Like PyTorch, a scheduler records each group's lr
// as the group's initialLr when the optimizer has none yet, takes the
// initialLrs as its base lrs, and makes its first step (epoch 0) when
// constructed.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/optim/optimizer.h"

namespace kiln::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets each group's lr.
  void step();
  /// The epoch of the last step (0 after construction).
  int64_t lastEpoch() const { return lastEpoch_; }
  /// The lr of each group after the last step (PyTorch's get_last_lr).
  const std::vector<double>& lastLr() const { return lastLr_; }
  const std::vector<double>& baseLrs() const { return baseLrs_; }

  /// The scheduler's state, as PyTorch's state_dict() names it: `last_epoch`
  /// (0-d i64), `base_lrs.g` and `last_lr.g` per group (0-d f64). The
  /// groups' current lrs are the optimizer's state (Optimizer::stateDict).
  nn::OrderedDict<Tensor> stateDict() const;
  /// Puts a stateDict() back; kiln::Error, before anything changes, for a
  /// dict of another number of groups or with entries missing or unknown.
  void loadStateDict(const nn::OrderedDict<Tensor>& dict);

 protected:
  /// The optimizer must outlive the scheduler (as in PyTorch and libtorch).
  explicit LRScheduler(Optimizer& optimizer);
  /// Makes the first step (epoch 0); each subclass constructor calls it last.
  void initialStep();
  /// The new lr of each group at lastEpoch(), from its current lr.
  virtual std::vector<double> computeLr() = 0;
  /// The current lr of each group.
  std::vector<double> groupLrs() const;

  Optimizer& optimizer_;
  std::vector<double> baseLrs_;
  int64_t lastEpoch_ = -1;
  bool initial_ = false;  ///< inside initialStep (PyTorch's _is_initial)

 private:
  std::vector<double> lastLr_;
};

/// lr multiplied by gamma every stepSize epochs: base_lr * gamma^floor(epoch / stepSize).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t stepSize, double gamma = 0.1);

 private:
  std::vector<double> computeLr() override;
  int64_t stepSize_;
  double gamma_;
};

/// Cosine annealing from the base lr to etaMin over tMax epochs (SGDR without
/// restarts): lr(t) = etaMin + (base - etaMin) (1 + cos(π t / tMax)) / 2,
/// computed as PyTorch's step() computes it, recursively from lr(t - 1):
///   lr(t) = (1 + cos(π t / tMax)) / (1 + cos(π (t - 1) / tMax)) (lr(t - 1) - etaMin) + etaMin,
/// and lr(t - 1) + (base - etaMin) (1 - cos(π / tMax)) / 2 where the
/// denominator vanishes (t - 1 - tMax a multiple of 2 tMax). Past tMax the
/// lr rises again along the same cosine, as in PyTorch.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t tMax, double etaMin = 0.0);

 private:
  std::vector<double> computeLr() override;
  int64_t tMax_;
  double etaMin_;
};

/// A linear ramp of the lr's factor from startFactor to endFactor over
/// totalIters epochs, then endFactor: linear warmup with startFactor < 1.
/// As PyTorch's LinearLR (recursive form): lr(0) = lr * startFactor, then
/// lr(t) = lr(t - 1) * (1 + (end - start) / (totalIters * start + (t - 1) * (end - start))).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double startFactor = 1.0 / 3, double endFactor = 1.0, int64_t totalIters = 5);

 private:
  std::vector<double> computeLr() override;
  double startFactor_, endFactor_;
  int64_t totalIters_;
};

}  // namespace kiln::optim
