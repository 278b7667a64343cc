// optim::Adam and optim::AdamW, as torch.optim.Adam and torch.optim.AdamW
// (their single-tensor path, which PyTorch takes for CPU tensors). For each
// parameter p with gradient g, at step t (counted per parameter from 1):
//
//   p = p * (1 - lr * weightDecay)              AdamW (decoupled), if weightDecay != 0
//   g = g + weightDecay * p                     Adam (L2), if weightDecay != 0
//   m = lerp(m, g, 1 - beta1)                   m + (1 - beta1) * (g - m)
//   v = beta2 * v + ((1 - beta2) * g) * g
//   vmax = maximum(vmax, v), used for v below    amsgrad
//   stepSize = lr / (1 - beta1^t)               in f64, as Python floats
//   denom = sqrt(v) / (1 - beta2^t)^0.5 + eps
//   p = p + (-stepSize * m) / denom
//
// in PyTorch's order of operations, with the Python-float quantities (the
// bias corrections, stepSize) computed in f64 and then used as scalars of
// the parameter's dtype.
#pragma once

#include <cstdint>

#include "frontend/optim/optimizer.h"

namespace kiln::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;  ///< added to the gradient (L2 penalty)
  bool amsgrad = false;
};

/// AdamW's options: Adam's, with decoupled weight decay, 1e-2 by default as in PyTorch.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 1e-2;  ///< p *= 1 - lr * weightDecay before the update
  bool amsgrad = false;
};

/// What Adam keeps per parameter (PyTorch's state[p]), made at its first step.
struct AdamParamState {
  int64_t step = 0;    ///< updates made so far
  Tensor expAvg;       ///< m, the running mean of the gradients
  Tensor expAvgSq;     ///< v, the running mean of their squares
  Tensor maxExpAvgSq;  ///< the largest v so far (amsgrad only)
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});

  void step() override;
  const AdamOptions& options() const { return options_; }
  /// The state of `param`, or null before its first step.
  const AdamParamState* state(const Tensor& param) const;

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupledWeightDecay);
  std::vector<std::pair<std::string, Tensor>> paramState(const Tensor& param) const override;
  std::vector<std::string> paramStateNames() const override;
  void setParamState(const Tensor& param, const std::map<std::string, Tensor>& entries) override;

 private:
  AdamOptions options_;
  bool decoupledWeightDecay_;
  detail::StateMap<AdamParamState> state_;
};

/// Adam with decoupled weight decay (Loshchilov & Hutter), as torch.optim.AdamW.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
};

}  // namespace kiln::optim
