// Tracing state for kiln::compile: the graph under construction and the
// eager tensors it captured. Internal to the frontend.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/tensor.h"
#include "ir/graph.h"

namespace kiln::detail {

class TraceState {
 public:
  explicit TraceState(std::string name = "traced") : graph(std::make_unique<ir::Graph>(std::move(name))) {}

  /// The trace active on this thread, or nullptr.
  static TraceState* current();

  /// The IR value standing for `t`: its traced value, or for an eager
  /// tensor a new graph input that captures it (bound at every call).
  ir::Value* valueOf(const Tensor& t, const char* op);
  /// A traced tensor for `value`, contiguous.
  Tensor wrap(ir::Value* value);
  /// A traced tensor for `value` with the strides and offset its eager twin
  /// would have (a view's).
  Tensor wrap(ir::Value* value, ir::Layout layout);

  std::unique_ptr<ir::Graph> graph;
  std::vector<Tensor> captures;  ///< eager tensors read by the trace, in input order after the arguments

 private:
  std::unordered_map<const TensorImpl*, ir::Value*> captured_;
};

/// Makes `state` the current trace for the guard's lifetime.
class TraceGuard {
 public:
  explicit TraceGuard(TraceState* state);
  ~TraceGuard();
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;

 private:
  TraceState* previous_;
};

}  // namespace kiln::detail
