// The autograd tape (DESIGN.md §8; docs/autograd.md): every op on tensors
// that require grad makes a Node — its backward function — linked by Edges
// to the nodes that made its inputs; a leaf that requires grad ends in an
// AccumulateGrad node that adds into its .grad. Internal to the frontend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::autograd {

class Node;

/// Where a gradient goes: input `inputNr` of `node` (null: nowhere).
struct Edge {
  std::shared_ptr<Node> node;
  int inputNr = 0;
};

/// A backward function: from the gradients of its outputs to those of its inputs.
class Node {
 public:
  explicit Node(std::string name) : name_(std::move(name)) {}
  virtual ~Node() = default;
  /// Gradients of the inputs (one per edge; undefined: none) from those of
  /// the outputs (undefined where nothing flowed into an output).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& gradOutputs) = 0;
  /// Frees what was saved for backward (after a backward without retainGraph).
  virtual void release() {}
  const std::string& name() const { return name_; }

  std::vector<Edge> next;                   ///< one per input
  std::vector<ir::TensorType> outputTypes;  ///< one per output, for missing gradients

 private:
  std::string name_;
};

/// Autograd's part of a TensorImpl.
struct Meta {
  bool requiresGrad = false;        ///< a leaf marked by setRequiresGrad()
  Tensor grad;                      ///< accumulated by backward(), leaves only
  std::shared_ptr<Node> gradFn;     ///< the node that made this tensor (null: a leaf)
  int outputNr = 0;                 ///< which output of gradFn
  std::weak_ptr<Node> accumulator;  ///< a leaf's AccumulateGrad, shared by its uses
  /// Called, in registration order, after backward accumulated into `grad`
  /// (frontend/autograd/hooks.h); the id is the handle that removes one.
  std::vector<std::pair<uint64_t, std::function<void(const Tensor&)>>> postAccumulateGradHooks;
};

// Note [Saved tensors]
// A formula that needs an input or output keeps a SavedTensor: a handle on
// the same storage without autograd (no reference cycle through an output's
// gradFn) and the version the tensor had when saved. If an in-place op wrote
// into the tensor since (its version counter, shared with its views, moved),
// unpacking it is an error naming the tensor and both versions, as PyTorch's
// "modified by an inplace operation"; after a backward without retainGraph
// unpacking is an error too.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  /// The saved tensor, or an error if it was modified in place or released.
  Tensor unpack(const std::string& node) const;
  void release() {
    data_ = Tensor();
    released_ = true;
  }
  bool defined() const { return data_.defined() || released_; }

 private:
  Tensor data_;
  uint64_t version_ = 0;
  bool released_ = false;
};

/// The edge a gradient for `t` flows along: its gradFn, its AccumulateGrad
/// when it is a leaf that requires grad, else none.
Edge gradientEdge(const Tensor& t);
/// t's autograd meta, made if missing.
Meta& metaOf(const Tensor& t);
/// `t`'s data as a new handle with no autograd (detach()).
Tensor shallowCopy(const Tensor& t);

}  // namespace kiln::autograd
