// How an op joins the autograd tape: attach() gives its outputs a node whose
// backward function maps output gradients to input gradients. The one
// mechanism behind every op's gradient: dispatch() attaches the registry
// formulas (formulas.h), views attach their movement's inverse, and
// composites (softmax, layer_norm, clamp, cat, ...) compute under a
// NoGradGuard and attach a formula of their own. Internal to the frontend.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "frontend/autograd/node.h"
#include "frontend/tensor.h"

namespace kiln::autograd {

/// Gradients of the inputs (one per input; undefined: none) from those of
/// the outputs. It may return gradients shaped like the broadcast result and
/// in the dtype the op computed in: attach() sums them over broadcast dims
/// to each input's shape and converts them to its dtype.
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& gradOutputs)>;

/// Whether grad mode is on and any of `inputs` requires grad. Every op that
/// may join the tape asks it (so a GradInputObserver sees its inputs).
bool needsGrad(std::span<const Tensor> inputs);

/// While alive, collects on this thread the tensors that require grad which
/// ops take as inputs, whether grad mode is on or off (each tensor once):
/// activation checkpointing's forward, run without grad, learns which
/// tensors from outside the function (parameters) its recomputation will
/// send gradients to. Nested observers each see the ops run while they are
/// innermost.
class GradInputObserver {
 public:
  GradInputObserver();
  ~GradInputObserver();
  GradInputObserver(const GradInputObserver&) = delete;
  GradInputObserver& operator=(const GradInputObserver&) = delete;
  const std::vector<Tensor>& seen() const { return seen_; }

 private:
  friend bool needsGrad(std::span<const Tensor> inputs);
  std::vector<Tensor> seen_;
  GradInputObserver* outer_;
};

/// Makes `outputs` (those with a floating-point dtype) the results of node
/// `name` over `inputs`, when needsGrad(inputs); `backward` is called with one
/// gradient per output (zeros where none flowed).
void attach(const std::string& name, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
            BackwardFn backward);

/// `g` summed over the dims broadcasting added or expanded, to `shape`.
Tensor sumToShape(const Tensor& g, const Shape& shape);

}  // namespace kiln::autograd
