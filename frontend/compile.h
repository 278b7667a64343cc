// kiln::compile: trace a function of tensors into a graph, run the pass
// pipeline, compile it and run it (DESIGN.md §2), like torch.compile.
//
//   auto f = kiln::compile([](const kiln::Tensor& x, const kiln::Tensor& b) {
//     return kiln::relu(x + b);
//   });
//   kiln::Tensor y = f(x, b);   // traces and compiles on the first call
//
// The compiled program is cached by the signature of the arguments (dtype,
// shape, device and requires_grad of each) and recompiled when it changes,
// up to CompileOptions::cacheLimit programs (then calls with new signatures
// run eagerly, with one warning); KILN_LOG=recompiles prints why each
// recompile happened. Eager tensors
// that the function reads without taking them as arguments (weights, say)
// are captured: the program reads their current storage at every call.
// Scalars in the function are constants of the program. Random draws
// (kiln::dropout) are not: each call draws afresh from the generator, which
// advances exactly as the eager function would advance it, so a compiled
// call gives the mask the eager call would have given. A function that runs
// backward() and optimizer.step() compiles whole: in-place updates of eager
// tensors and of arguments, and .grad assignments, are written back after
// each call, and
// programs are guarded on the host state the trace depended on
// (docs/compile.md, frontend/trace.h). The function must
// return a Tensor or a std::vector<Tensor> with at least one tensor. It may
// take its arguments one by one (up to 16) or as one std::vector<Tensor>.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/tensor.h"
#include "runtime/error.h"
#include "runtime/executable.h"

namespace kiln {

struct CompileOptions {
  /// The pass pipeline run on each traced graph.
  std::string pipeline = "canonicalize,fold-constants,cse,dce,fuse-attention,fuse-reductions,fuse-elementwise";
  /// Programs kept per compiled function, one per argument signature (dtype,
  /// shape, device and requires_grad of each argument), as
  /// torch._dynamo's cache_size_limit. Past it, a call with a new signature
  /// runs the function eagerly (same results, no compile), and the first
  /// such call warns once on stderr, naming the argument that changed.
  int cacheLimit = 8;
  /// On a device that records launches (CUDA graphs, OpenCL command
  /// buffers), a program called more than once is recorded and replayed
  /// (torch.compile's "reduce-overhead"; Note [Graph replay] in
  /// runtime/executable_replay.cpp, docs/devices.md) when that enqueues
  /// fewer commands than its steps; `always` records it whenever the device
  /// can, `off` never. KILN_GRAPH_REPLAY=0 turns it off in the whole process.
  runtime::GraphReplay graphReplay = runtime::GraphReplay::cheaper;
};

/// How a compiled program binds graph inputs after the arguments at every
/// call (Note [Per-call values] in frontend/trace.h): an eager tensor the
/// trace captured (its current storage), the .grad of a leaf (whatever it
/// is at the call), or numbers host code computes per call (a random draw's
/// seed and offset, an optimizer's bias corrections).
struct InputBinding {
  enum class Kind { capture, grad, perCall };
  Kind kind = Kind::capture;
  std::vector<int> inputs;  ///< the graph inputs it binds, in order
  std::string what;         ///< what they are, for messages
  /// The tensors to bind, one per input, given the call's arguments; run
  /// once per call, in input order.
  std::function<std::vector<Tensor>(std::span<const Tensor> args)> bind;
};

/// A write into eager state that each call makes after its kernels ran
/// (Note [Writes into eager state] in frontend/trace.h).
struct TraceWrite {
  /// elements: an eager tensor the trace captured, written in place;
  /// argument: argument `input`, written in place (the caller's tensor, at
  /// each call); grad: a leaf's .grad, assigned; argumentGrad: the .grad of
  /// argument `input` (a leaf that requires grad), assigned.
  enum class Kind { elements, argument, grad, argumentGrad };
  Kind kind = Kind::elements;
  Tensor target;    ///< the tensor written in place, or the leaf whose .grad is assigned (none for argument)
  int output = -1;  ///< graph output holding the new value; -1: the .grad is cleared
  /// For elements: the graph input that captured target's value before the
  /// call (the trace read it first), whose buffer the program may compute
  /// the new value into (Note [Donated buffers] in codegen/compile_graph.cpp);
  /// -1 when the trace wrote it without reading it. For argument: the
  /// argument's index (its graph input), donated the same way.
  int input = -1;
};

/// A condition on host state the trace depended on (Note [Guards] in
/// frontend/trace.h); a program runs only while all its guards hold.
struct Guard {
  std::string what;                                         ///< the condition, for KILN_LOG=recompiles
  std::function<bool(std::span<const Tensor> args)> holds;  ///< given the call's arguments
};

/// A traced graph: its first `numResults` outputs are the function's
/// results, the others the new values of the writes; its inputs after the
/// arguments are bound by `bindings`.
struct Trace {
  std::unique_ptr<ir::Graph> graph;
  int numResults = 0;
  std::vector<InputBinding> bindings;
  std::vector<TraceWrite> writes;
  std::vector<Guard> guards;
};

namespace detail {
struct CompiledProgram;
using TraceFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
/// Traces `fn` called with placeholders of `inputs` types into a graph
/// named `name`, running nothing (like jax.make_jaxpr).
/// With `callArgs` (the tensors of the call being traced for), arguments that
/// require grad are traced as leaves: backward() inside the function
/// accumulates into their gradients, which start from the caller's (a grad
/// binding and a guard on its state) and are written back to it.
Trace traceGraph(const TraceFn& fn, const std::vector<ir::TensorType>& inputs, const std::string& name = "traced",
                 const std::vector<Tensor>* callArgs = nullptr);
/// The error when a compiled function is called with the wrong number of tensors.
std::string arityMessage(size_t given);

/// The untyped engine behind kiln::compile.
class CompileEngine {
 public:
  CompileEngine(TraceFn fn, CompileOptions options);
  ~CompileEngine();

  std::vector<Tensor> call(const std::vector<Tensor>& inputs);

  /// Programs compiled so far (one per argument signature seen).
  int numCompiles() const { return compiles_; }
  /// Calls that ran eagerly because the cache limit was reached.
  int numEagerFallbacks() const { return eagerFallbacks_; }
  /// The fused graph of the most recent call's program, printed.
  std::string lastGraph() const;
  /// Kernels one call of the most recent call's program launches.
  int lastNumKernels() const;
  /// Of those, the matmuls that run a kernel as their epilogue (Note
  /// [Matmul epilogues] in runtime/blas.cpp): each would be two launches.
  int lastNumEpilogues() const;
  /// What graph replay did for the most recent call's program (Note [Graph
  /// replay] in runtime/executable_replay.cpp).
  runtime::ReplayInfo lastReplay() const;
  std::vector<int> lastCollectiveOverlaps() const;

 private:
  std::shared_ptr<CompiledProgram> compileFor(const std::vector<Tensor>& inputs);
  std::vector<Tensor> run(const CompiledProgram& program, const std::vector<Tensor>& inputs);

  TraceFn fn_;
  CompileOptions options_;
  /// Per argument signature, the programs traced for it (each valid while its guards hold).
  std::map<std::string, std::vector<std::shared_ptr<CompiledProgram>>> programs_;
  std::shared_ptr<CompiledProgram> last_;
  std::vector<std::string> lastSignature_;  ///< per argument, of the most recent call
  int compiles_ = 0;
  int eagerFallbacks_ = 0;
  bool warnedLimit_ = false;
  bool warnedAlias_ = false;
};
}  // namespace detail

/// A function compiled by kiln::compile; calling it runs the program.
template <typename F>
class CompiledFunction {
 public:
  CompiledFunction(F fn, CompileOptions options)
      : engine_(std::make_shared<detail::CompileEngine>(traceFn(std::move(fn)), std::move(options))) {}

  template <typename... Args>
  auto operator()(const Args&... args) {
    static_assert((std::is_convertible_v<const Args&, const Tensor&> && ...),
                  "kiln::compile: arguments of a compiled function must be kiln::Tensor");
    static_assert(std::is_invocable_v<F&, const Args&...> || std::is_invocable_v<F&, const std::vector<Tensor>&>,
                  "kiln::compile: the compiled function is called with arguments its function does not take");
    std::vector<Tensor> outputs = engine_->call({args...});
    if constexpr (!std::is_invocable_v<F&, const Args&...>) {
      return outputs;  // a function of one std::vector<Tensor>
    } else if constexpr (std::is_same_v<std::invoke_result_t<F&, const Args&...>, std::vector<Tensor>>) {
      return outputs;
    } else {
      return outputs.at(0);
    }
  }

  int numCompiles() const { return engine_->numCompiles(); }
  int numEagerFallbacks() const { return engine_->numEagerFallbacks(); }
  std::string lastGraph() const { return engine_->lastGraph(); }
  int lastNumKernels() const { return engine_->lastNumKernels(); }
  int lastNumEpilogues() const { return engine_->lastNumEpilogues(); }
  runtime::ReplayInfo lastReplay() const { return engine_->lastReplay(); }
  /// Per collective of the most recent call's program (an all-reduce of a
  /// DDP bucket), in issue order, the steps that run while it communicates
  /// (Note [Scheduling collectives] in codegen/lowering_collective.cpp).
  std::vector<int> lastCollectiveOverlaps() const { return engine_->lastCollectiveOverlaps(); }

  /// `fn` as an untyped function of a vector of tensors.
  static detail::TraceFn traceFn(F fn) {
    return [fn = std::make_shared<F>(std::move(fn))](const std::vector<Tensor>& inputs) { return invoke(*fn, inputs); };
  }

 private:
  static std::vector<Tensor> invoke(F& fn, const std::vector<Tensor>& in) {
    if constexpr (std::is_invocable_r_v<std::vector<Tensor>, F&, const std::vector<Tensor>&>)
      return fn(in);  // a function of all the arguments as one vector
    else
      return dispatchArity(fn, in, std::make_index_sequence<16>{});
  }

  // Calls fn with as many tensors as it takes (up to 16).
  template <size_t... I>
  static std::vector<Tensor> dispatchArity(F& fn, const std::vector<Tensor>& in, std::index_sequence<I...>) {
    std::vector<Tensor> out;
    bool called = false;
    (tryCall<I>(fn, in, out, called), ...);
    if (!called) throw Error(detail::arityMessage(in.size()));
    return out;
  }

  template <size_t N>
  static void tryCall(F& fn, const std::vector<Tensor>& in, std::vector<Tensor>& out, bool& called) {
    callWith(fn, in, out, called, std::make_index_sequence<N>{});
  }

  template <size_t... I>
  static void callWith(F& fn, const std::vector<Tensor>& in, std::vector<Tensor>& out, bool& called,
                       std::index_sequence<I...>) {
    if constexpr (std::is_invocable_v<F&, decltype((void)I, std::declval<const Tensor&>())...>) {
      if (called || in.size() != sizeof...(I)) return;
      called = true;
      using R = std::invoke_result_t<F&, decltype((void)I, std::declval<const Tensor&>())...>;
      if constexpr (std::is_void_v<R>) {
        fn(in[I]...);
      } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
        out = fn(in[I]...);
      } else {
        static_assert(std::is_convertible_v<R, Tensor>,
                      "kiln::compile: the function must return a Tensor or std::vector<Tensor>");
        out = {Tensor(fn(in[I]...))};
      }
    }
  }

  std::shared_ptr<detail::CompileEngine> engine_;
};

/// Traces `fn` with placeholder arguments of the given types into a graph
/// without running anything: what kiln::compile would compile.
template <typename F>
Trace trace(F fn, const std::vector<ir::TensorType>& inputs, const std::string& name = "traced") {
  return detail::traceGraph(CompiledFunction<F>::traceFn(std::move(fn)), inputs, name);
}

/// Compiles `fn`, a callable taking kiln::Tensor arguments.
template <typename F>
CompiledFunction<F> compile(F fn, CompileOptions options = {}) {
  return CompiledFunction<F>(std::move(fn), std::move(options));
}

}  // namespace kiln
