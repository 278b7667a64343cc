// amp::GradScaler, torch.amp.GradScaler: loss scaling for mixed-precision
// training. The loss is multiplied by the scale before backward(), so that
// small f16 gradients do not flush to zero; step() divides the gradients
// back (unscale_), skips the optimizer step when any of them is inf or NaN,
// and update() lowers the scale after such a step and raises it after
// growthInterval clean ones in a row:
//
//   amp::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                     // optional: to clip first
//   nn::utils::clipGradNorm_(model->parameters(), 1.0);
//   scaler.step(optimizer);                         // skipped on inf/NaN
//   scaler.update();
#pragma once

#include <cstdint>
#include <unordered_map>

#include "frontend/nn/ordered_dict.h"
#include "frontend/optim/optimizer.h"
#include "frontend/tensor.h"

namespace kiln::amp {

struct GradScalerOptions {
  double initScale = 65536.0;  ///< 2^16, PyTorch's default
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  bool enabled = true;  ///< false: every call passes through (scale 1, no checks)
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// loss · scale (the loss itself when disabled).
  Tensor scale(const Tensor& loss) const;
  /// Divides the gradients of `optimizer`'s parameters by the scale, in
  /// place, and records whether any is inf or NaN. Once per optimizer
  /// between update()s: a second call is a kiln::Error, as in PyTorch.
  void unscale_(optim::Optimizer& optimizer);
  /// unscale_ (unless done since the last update), then optimizer.step()
  /// unless a gradient was inf or NaN. Returns whether it stepped.
  bool step(optim::Optimizer& optimizer);
  /// Halves (backoffFactor) the scale after a step with an inf/NaN gradient
  /// and restarts the count of clean steps; multiplies it by growthFactor
  /// after growthInterval clean steps in a row. Forgets which optimizers
  /// were unscaled. kiln::Error when no step() or unscale_() came since the
  /// last update(), as in PyTorch.
  void update();

  double getScale() const { return scale_; }
  /// Clean steps since the scale last changed (PyTorch's _growth_tracker).
  int64_t growthTracker() const { return growthTracker_; }

  /// "scale" and "growth_tracker" as 0-d tensors (f64, i64), for checkpoints.
  nn::OrderedDict<Tensor> stateDict() const;
  void loadStateDict(const nn::OrderedDict<Tensor>& dict);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growthTracker_ = 0;
  /// Per optimizer since the last update(): unscaled, and whether a
  /// gradient was inf or NaN.
  std::unordered_map<const optim::Optimizer*, bool> foundInf_;
};

}  // namespace kiln::amp
