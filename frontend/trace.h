// Tracing state for kiln::compile: the graph under construction, what each
// of its inputs after the arguments is bound to at every call, the writes
// into eager state the trace made, and the guards its program depends on.
// Internal to the frontend.
//
// Note [Traced draws]
// A random op (kiln::dropout) reads its generator's seed and the offset of
// its next draw, then advances it. Traced, those two numbers must not become
// constants, or every call of the compiled program would replay the first
// call's mask. Instead the draw is a per-call value (Note [Per-call
// values]): two graph inputs (0-d i64, named seedN and offsetN) that each
// call of the compiled program binds from the generator, draw by draw in
// trace order, advancing it once per draw, which is what the eager function
// does. Tracing itself advances nothing, so the first call (which traces,
// then runs) advances the generator once per draw, like every later call.
// The program keeps a handle sharing the generator's state (Generator is a
// handle), so a later manualSeed or setOffset is seen by the next call.
//
// Note [Per-call values]
// Host code inside a traced function may compute numbers from host state
// that changes between calls: a generator's offset, an optimizer's step
// count and bias corrections, a learning rate a scheduler changes. Such code
// asks for them through perCall() (frontend/per_call.h) with a function
// that computes them: eagerly it runs at once; traced, the values become
// graph inputs and the function runs at every call of the program, before
// its kernels, in trace order, so the host state advances exactly as the
// eager function would advance it. Every graph input after the arguments is
// bound that way (an InputBinding): captured eager tensors, the .grad of
// leaves, draws and per-call numbers.
//
// Note [Writes into eager state]
// A traced function may update eager tensors in place (an optimizer's
// parameters and state) and assign leaves' .grad (backward(), zeroGrad()).
// The trace does neither: it records the new value (functionalization), so
// that later reads in the trace see it, and the program returns it as an
// extra output that each call writes back (TraceWrite): into the tensor's
// elements (or, when nothing else sees its storage, by taking the new
// storage), or into the leaf's .grad. The extra outputs follow the
// results: written tensors in the order the trace first read or wrote each,
// then assigned gradients in the order it first touched each. An eager
// tensor written in place is
// bumped a version at trace time, so that autograd's saved-tensor check
// fires as it would eagerly. Reading another view of storage the trace wrote
// is an error (the program could not keep the two coherent); tensors with
// the same storage, offset and strides (detach(), a saved tensor) are one
// tensor to the trace.
//
// Note [Guards]
// What a trace decided from host state (whether a leaf had a gradient,
// whether an optimizer's momentum buffer existed) is recorded as a guard: a
// test that the state is still so. A program is reused only while all its
// guards hold; otherwise kiln::compile traces again (a recompile, counted
// against the cache limit and explained by KILN_LOG=recompiles), as
// torch._dynamo does.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/compile.h"
#include "frontend/tensor.h"
#include "ir/graph.h"

namespace kiln::detail {

struct PerCallInput;

class TraceState {
 public:
  explicit TraceState(std::string name = "traced") : graph(std::make_unique<ir::Graph>(std::move(name))) {}

  /// The trace active on this thread, or nullptr.
  static TraceState* current();

  /// The IR value standing for `t`: its traced value, or for an eager
  /// tensor a new graph input that captures it (bound at every call), or the
  /// value the trace last wrote into it (Note [Writes into eager state]).
  ir::Value* valueOf(const Tensor& t, const char* op);
  /// Records that `result` (traced) is the new value of the eager tensor
  /// `target`, written in place by `op`.
  void writeEager(const Tensor& target, const Tensor& result, const char* op);
  /// The .grad of eager leaf `leaf` as this trace sees it: what the trace
  /// last assigned, else its gradient at call time (a graph input, guarded
  /// to exist with its type), else undefined (guarded to stay so).
  Tensor gradOf(const Tensor& leaf);
  /// Assigns the .grad of eager leaf `leaf` (undefined clears it).
  void setGradOf(const Tensor& leaf, const Tensor& grad);
  /// Graph inputs bound at every call to what `compute` returns (Note
  /// [Per-call values]).
  std::vector<Tensor> perCall(const std::vector<PerCallInput>& inputs, std::function<std::vector<Tensor>()> compute);
  /// Records a guard (Note [Guards]): the program is valid while `holds()`.
  void guard(std::string what, std::function<bool()> holds);
  /// A traced tensor for `value`, contiguous.
  Tensor wrap(ir::Value* value);
  /// A traced tensor for `value` with the strides and offset its eager twin
  /// would have (a view's).
  Tensor wrap(ir::Value* value, ir::Layout layout);
  /// The trace's writes into eager state, their values appended to the graph's
  /// outputs after `numResults` results; called once, when tracing ends.
  std::vector<TraceWrite> finish(std::vector<ir::Value*>& outputs);

  std::unique_ptr<ir::Graph> graph;
  std::vector<InputBinding> bindings;  ///< of the inputs after the arguments, in input order
  std::vector<Guard> guards;

 private:
  /// An eager tensor the trace read or wrote.
  struct EagerRecord {
    Tensor tensor;
    ir::Value* latest = nullptr;  ///< its value now, in the trace (null: never read nor written)
    bool written = false;
    int input = -1;  ///< the graph input capturing its value before the call, if the trace read that
  };
  /// The .grad of a leaf as the trace sees it.
  struct GradRecord {
    std::shared_ptr<TensorImpl> leaf;
    Tensor current;            ///< its gradient now, in the trace (traced; undefined: none)
    ir::Value* initial = nullptr;  ///< the input bound to its gradient at call time, if it had one
    bool assigned = false;     ///< the trace assigned it
    bool known = false;        ///< `current` is meaningful (read or assigned)
  };
  EagerRecord& recordOf(const Tensor& t, const char* op);
  GradRecord& gradRecordOf(const Tensor& leaf);

  std::vector<EagerRecord> eager_;
  std::unordered_map<std::string, int> perCallNames_;  ///< inputs made per name, to number them
  std::vector<GradRecord> grads_;
};

/// Makes `state` the current trace for the guard's lifetime (nullptr:
/// suspends tracing, so that code runs eagerly, e.g. to create an
/// optimizer's state).
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
