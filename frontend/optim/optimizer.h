// optim::Optimizer, the base of kiln's optimizers, as torch.optim.Optimizer:
// parameter groups (each with its own learning rate and weight decay),
// zeroGrad() and step(). An optimizer keeps handles on the parameters it
// updates — the same tensors a module holds — and changes them in place
// under a NoGradGuard, so the module sees every step:
//
//   optim::AdamW opt(model->parameters(), {.lr = 1e-3});
//   for (...) {
//     opt.zeroGrad();
//     Tensor loss = ...;
//     loss.backward();
//     opt.step();
//   }
//
// Parameter groups, as PyTorch's list of dicts; options a group leaves
// unset are the optimizer's:
//
//   optim::SGD opt({{.params = backbone->parameters(), .lr = 1e-3},
//                   {.params = head->parameters()}},
//                  {.lr = 1e-2, .momentum = 0.9});
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::optim {

/// A group of parameters that share a learning rate and a weight decay (an
/// entry of torch's param_groups). Options left unset when the group is
/// given to an optimizer take the optimizer's; after construction both are
/// set, and a learning-rate scheduler (or the user) may change `lr` between
/// steps.
// (Members have initializers so that designated initializers may leave
// them out without -Wmissing-field-initializers.)
struct ParamGroup {
  std::vector<Tensor> params = {};
  std::optional<double> lr = std::nullopt;
  std::optional<double> weightDecay = std::nullopt;
  /// The lr the first scheduler found (PyTorch's "initial_lr"), which every
  /// scheduler of the optimizer takes as its base lr.
  std::optional<double> initialLr = std::nullopt;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (the others are
  /// skipped, as in PyTorch), with no gradient recorded.
  virtual void step() = 0;
  /// Clears the gradients (setToNone, PyTorch's default) or fills them with zeros.
  void zeroGrad(bool setToNone = true);

  std::vector<ParamGroup>& paramGroups() { return groups_; }
  const std::vector<ParamGroup>& paramGroups() const { return groups_; }
  /// Adds a group; unset options take the optimizer's defaults. A parameter
  /// already in another group is an error.
  void addParamGroup(ParamGroup group);

 protected:
  /// `name` is for messages ("SGD"); defaultLr and defaultWeightDecay fill
  /// what groups leave unset.
  Optimizer(const char* name, std::vector<ParamGroup> groups, double defaultLr, double defaultWeightDecay);

  const char* name_;

 private:
  double defaultLr_, defaultWeightDecay_;
  std::vector<ParamGroup> groups_;
};

namespace detail {
/// Per-parameter state of an optimizer, keyed by the parameter's TensorImpl
/// (the optimizer's groups keep the parameters, hence the keys, alive).
template <typename State>
using StateMap = std::unordered_map<const TensorImpl*, State>;
}  // namespace detail

}  // namespace kiln::optim
