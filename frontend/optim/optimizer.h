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
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frontend/nn/ordered_dict.h"
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

  /// The optimizer's state as tensors by name, PyTorch's state_dict()
  /// flattened (docs/checkpoints.md): per group g `param_groups.g.lr`,
  /// `param_groups.g.weight_decay` and, once a scheduler set it,
  /// `param_groups.g.initial_lr` (0-d f64 on the CPU); per parameter i,
  /// numbered through the groups in order as PyTorch numbers them, the
  /// subclass's `state.i.NAME` entries (its own tensors, not copies), none
  /// before the parameter's first step.
  nn::OrderedDict<Tensor> stateDict() const;
  /// Puts a stateDict() back: the groups' hyperparameters, and each
  /// parameter's state, copied into the optimizer's own state tensors where
  /// they exist (so that a compiled step that captured them reads the new
  /// values) and made otherwise. kiln::Error, before anything changes, for
  /// a dict of another number of groups, an entry this optimizer does not
  /// have, or a state tensor whose shape differs from its parameter's.
  void loadStateDict(const nn::OrderedDict<Tensor>& dict);

 protected:
  /// `name` is for messages ("SGD"); defaultLr and defaultWeightDecay fill
  /// what groups leave unset.
  Optimizer(const char* name, std::vector<ParamGroup> groups, double defaultLr, double defaultWeightDecay);

  const char* name_;

  /// Parameter `param`'s state entries, named without their `state.i.`
  /// prefix ("exp_avg", "step", ...); none before its first step.
  virtual std::vector<std::pair<std::string, Tensor>> paramState(const Tensor& param) const = 0;
  /// The entry names paramState() gives a stepped parameter: a dict has
  /// all of them for a parameter or none (loadStateDict checks).
  virtual std::vector<std::string> paramStateNames() const = 0;
  /// Replaces `param`'s state by `entries` (all of paramStateNames(), of
  /// the parameter's shape but `step`; or none: not stepped yet).
  virtual void setParamState(const Tensor& param, const std::map<std::string, Tensor>& entries) = 0;

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
