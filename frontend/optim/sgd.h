// optim::SGD, as torch.optim.SGD (its single-tensor path, which PyTorch
// takes for CPU tensors), with momentum, dampening, Nesterov momentum and
// weight decay. For each parameter p with gradient g, in this order:
//
//   g = g + weightDecay * p                      if weightDecay != 0
//   buf = g (a copy)                             first step with momentum
//   buf = momentum * buf + (1 - dampening) * g   later steps
//   g = nesterov ? g + momentum * buf : buf      if momentum != 0
//   p = p - lr * g
#pragma once

#include "frontend/optim/optimizer.h"

namespace kiln::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});

  void step() override;
  const SGDOptions& options() const { return options_; }
  /// The momentum buffer of `param` (undefined before its first step, or without momentum).
  Tensor momentumBuffer(const Tensor& param) const;

 protected:
  std::vector<std::pair<std::string, Tensor>> paramState(const Tensor& param) const override;
  std::vector<std::string> paramStateNames() const override { return {"momentum_buffer"}; }
  void setParamState(const Tensor& param, const std::map<std::string, Tensor>& entries) override;

 private:
  SGDOptions options_;
  detail::StateMap<Tensor> momentumBuffers_;
};

}  // namespace kiln::optim
