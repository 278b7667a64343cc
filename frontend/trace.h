// Tracing state for kiln::compile: the graph under construction, the
// eager tensors it captured and the random draws it made. Internal to the
// frontend.
//
// Note [Traced draws]
// A random op (kiln::dropout) reads its generator's seed and the offset of
// its next draw, then advances it. Traced, those two numbers must not become
// constants, or every call of the compiled program would replay the first
// call's mask. Instead the trace makes them graph inputs (0-d i64, named
// seedN and offsetN) and records the draw (TracedDraw); each call of the
// compiled program binds them from the generator, draw by draw in trace
// order, advancing it once per draw, which is what the eager function does.
// Tracing itself advances nothing, so the first call (which traces, then
// runs) advances the generator once per draw, like every later call. The
// program keeps a handle sharing the generator's state (Generator is a
// handle), so a later manualSeed or setOffset is seen by the next call.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/compile.h"
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
  /// The seed and offset of one random draw from `generator`, as traced 0-d
  /// i64 tensors on `device` standing for two new graph inputs (Note
  /// [Traced draws]). The generator does not advance while tracing.
  std::pair<Tensor, Tensor> draw(const Generator& generator, Device device);
  /// A traced tensor for `value`, contiguous.
  Tensor wrap(ir::Value* value);
  /// A traced tensor for `value` with the strides and offset its eager twin
  /// would have (a view's).
  Tensor wrap(ir::Value* value, ir::Layout layout);

  std::unique_ptr<ir::Graph> graph;
  std::vector<Tensor> captures;  ///< eager tensors read by the trace, in input order after the arguments
  std::vector<TracedDraw> draws;  ///< random draws, in trace order (their inputs interleave with the captures)

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
