// The engine behind kiln::compile: trace, pass pipeline, compileGraph, run.
#include "frontend/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "codegen/compile_graph.h"
#include "frontend/amp/autocast.h"
#include "frontend/autograd/node.h"
#include "frontend/inplace.h"
#include "frontend/trace.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "runtime/executable.h"
#include "runtime/log.h"
#include "runtime/profiler_events.h"

namespace kiln::detail {

struct CompiledProgram {
  std::string graphText;  ///< the graph after the pipeline, for inspection
  runtime::Executable exe;
  std::vector<ir::TensorType> outputTypes;
  int numResults = 0;                  ///< outputs that are the function's results; the rest feed `writes`
  std::vector<InputBinding> bindings;  ///< of the inputs after the arguments, run at every call
  std::vector<TraceWrite> writes;      ///< made after every call
  std::vector<Guard> guards;           ///< the program runs only while these hold
};

namespace {
/// What changed between the signatures of two calls, per argument.
std::string recompileReason(const std::vector<std::string>& before, const std::vector<std::string>& now) {
  if (before.empty()) return "no program matches the arguments";
  std::string why;
  for (size_t i = 0; i < now.size() && i < before.size(); ++i)
    if (before[i] != now[i])
      why += fmt::format("{}argument {} changed from {} to {}", why.empty() ? "" : ", ", i, before[i], now[i]);
  return why.empty() ? "the arguments match an earlier signature no longer cached" : why;
}
}  // namespace

std::string arityMessage(size_t given) {
  return fmt::format("compile: the compiled function cannot be called with {} tensors", given);
}

CompileEngine::CompileEngine(TraceFn fn, CompileOptions options) : fn_(std::move(fn)), options_(std::move(options)) {
  passes::PassManager check(options_.pipeline);  // report a bad pipeline now, not at the first call
}

CompileEngine::~CompileEngine() = default;

Trace traceGraph(const TraceFn& fn, const std::vector<ir::TensorType>& inputs, const std::string& name,
                 const std::vector<Tensor>* callArgs) {
  TraceState state(name);
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.push_back(state.wrap(state.graph->addInput(inputs[i], fmt::format("x{}", i))));
  // Arguments that require grad are leaves of the trace, their gradients
  // starting from the caller's, bound and guarded like a captured leaf's.
  std::vector<std::pair<int, ir::Value*>> leaves;  // argument, its gradient's input (null: none)
  for (size_t i = 0; callArgs && i < callArgs->size(); ++i) {
    const Tensor& real = (*callArgs)[i];
    if (!real.requiresGrad() || !real.isLeaf()) continue;
    args[i].setRequiresGrad();
    const Tensor g = real.grad();
    const std::optional<ir::TensorType> type = g.defined() ? std::optional(g.type()) : std::nullopt;
    ir::Value* seed = nullptr;
    if (type) {
      seed = state.graph->addInput(*type, fmt::format("grad_x{}", i));
      args[i].setGrad(state.wrap(seed));
      state.bindings.push_back({InputBinding::Kind::grad,
                                {state.graph->numInputs() - 1},
                                fmt::format("the gradient of argument {}", i),
                                [i](std::span<const Tensor> call) { return std::vector<Tensor>{call[i].grad()}; }});
    }
    state.guards.push_back({fmt::format("the gradient of argument {} is {}", i, type ? type->str() : "undefined"),
                            [i, type](std::span<const Tensor> call) {
                              const Tensor now = call[i].grad();
                              return type ? now.defined() && now.type() == *type : !now.defined();
                            }});
    leaves.emplace_back(static_cast<int>(i), seed);
  }
  // Autocast decides which casts the trace holds: a program traced under
  // one state does not run under another (torch.compile guards on it too).
  state.guards.push_back(
      {fmt::format("the autocast state is '{}'", autocastSignature()),
       [signature = autocastSignature()](std::span<const Tensor>) { return autocastSignature() == signature; }});
  std::vector<Tensor> results;
  {
    TraceGuard guard(&state);
    results = fn(args);
  }
  KILN_CHECK(!results.empty(), "compile: the traced function returned no tensors; return the tensors it computes");
  std::vector<ir::Value*> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    KILN_CHECK(results[i].defined(), "compile: result {} of the traced function is an undefined tensor", i);
    outputs.push_back(state.valueOf(results[i], "compile"));
  }
  Trace trace;
  trace.numResults = static_cast<int>(outputs.size());
  trace.writes = state.finish(outputs);
  // Arguments the function updated in place (`x.add_(1)`): as eagerly, the
  // caller's tensor takes the new value after each call.
  for (size_t i = 0; i < args.size(); ++i) {
    ir::Value* now = args[i].impl()->traced;
    if (now == state.graph->input(static_cast<int>(i))) continue;
    trace.writes.push_back(
        {TraceWrite::Kind::argument, Tensor(), static_cast<int>(outputs.size()), static_cast<int>(i)});
    outputs.push_back(now);
  }
  // The arguments' gradients backward() left, written back to the caller's.
  for (const auto& [argument, seed] : leaves) {
    const Tensor& leaf = args[static_cast<size_t>(argument)];
    const Tensor g = leaf.impl()->autograd ? leaf.impl()->autograd->grad : Tensor();
    ir::Value* now = g.defined() ? state.valueOf(g, "backward") : nullptr;
    if (now == seed) continue;
    trace.writes.push_back(
        {TraceWrite::Kind::argumentGrad, Tensor(), now ? static_cast<int>(outputs.size()) : -1, argument});
    if (now) outputs.push_back(now);
  }
  state.graph->setOutputs(outputs);
  trace.graph = std::move(state.graph);
  trace.bindings = std::move(state.bindings);
  trace.guards = std::move(state.guards);
  return trace;
}

std::shared_ptr<CompiledProgram> CompileEngine::compileFor(const std::vector<Tensor>& inputs) {
  std::vector<ir::TensorType> types;
  for (const Tensor& t : inputs) types.push_back(t.type());
  profiler::RecordFunction range("compile", "compile");
  std::optional<profiler::RecordFunction> phase(std::in_place, "compile", "trace");
  Trace trace = traceGraph(fn_, types, "traced", &inputs);
  phase.emplace("compile", "pass_pipeline");
  passes::PassManager(options_.pipeline).run(*trace.graph);
  phase.reset();
  auto program = std::make_shared<CompiledProgram>();
  // The new value of a tensor written in place may be computed into the
  // buffer of its value before the call (Note [Donated buffers]).
  std::vector<codegen::Donation> donations;
  for (const TraceWrite& w : trace.writes)
    if ((w.kind == TraceWrite::Kind::elements || w.kind == TraceWrite::Kind::argument) && w.input >= 0)
      donations.push_back({w.input, w.output});
  program->exe = codegen::compileGraph(*trace.graph, codegen::graphDevice(*trace.graph), {}, donations);
  // Note [Graph replay] in runtime/executable_replay.cpp: on devices that record.
  program->exe.replay = options_.graphReplay;
  program->exe.writeBack.assign(program->exe.outputSlots.size(), -1);
  for (const TraceWrite& w : trace.writes)
    if ((w.kind == TraceWrite::Kind::elements || w.kind == TraceWrite::Kind::argument) && w.output >= 0 && w.input >= 0)
      program->exe.writeBack[static_cast<size_t>(w.output)] = w.input;
  program->exe.replayCache = runtime::makeReplayCache();
  for (ir::Value* v : trace.graph->outputs()) program->outputTypes.push_back(v->type());
  program->numResults = trace.numResults;
  program->bindings = std::move(trace.bindings);
  program->writes = std::move(trace.writes);
  program->guards = std::move(trace.guards);
  program->graphText = ir::printGraph(*trace.graph);
  return program;
}

namespace {
/// Why `p` cannot run on `inputs` as eager code would (an argument that
/// shares storage with a tensor the program writes in place, whose writes
/// the trace could not see through the argument), or empty.
std::string writtenAlias(const CompiledProgram& p, const std::vector<Tensor>& inputs) {
  for (const TraceWrite& w : p.writes) {
    if (w.kind == TraceWrite::Kind::grad || w.kind == TraceWrite::Kind::argumentGrad) continue;
    const bool argument = w.kind == TraceWrite::Kind::argument;
    const Tensor& target = argument ? inputs[static_cast<size_t>(w.input)] : w.target;
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (argument && static_cast<int>(j) == w.input) continue;
      if (inputs[j].impl()->storage == target.impl()->storage)
        return fmt::format("argument {} ({}) shares storage with {} {}, which the compiled function writes in place", j,
                           inputs[j].str(), argument ? "argument " + std::to_string(w.input) : "captured tensor",
                           target.str());
    }
  }
  return {};
}

/// What of `p`'s guards does not hold for a call with `inputs`, or empty.
std::string failedGuard(const CompiledProgram& p, const std::vector<Tensor>& inputs) {
  for (const Guard& g : p.guards)
    if (!g.holds(inputs)) return g.what;
  return {};
}
}  // namespace

std::vector<Tensor> CompileEngine::call(const std::vector<Tensor>& inputs) {
  profiler::RecordFunction range("compile", "compiled_call");
  KILN_CHECK(!TraceState::current(), "compile: calling a compiled function while tracing another is not supported yet");
  std::string key;
  std::vector<std::string> signature;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined(), "compile: argument {} is an undefined tensor", i);
    KILN_CHECK(!inputs[i].isTraced(), "compile: argument {} ({}) was produced while tracing and has no value", i,
               inputs[i].str());
    signature.push_back(inputs[i].type().str() + (inputs[i].requiresGrad() ? " requires_grad" : ""));
    key += signature.back() + ";";
  }
  std::vector<std::shared_ptr<CompiledProgram>>& candidates = programs_[key];
  std::shared_ptr<CompiledProgram> program;
  std::string failed;
  for (const auto& candidate : candidates) {
    failed = failedGuard(*candidate, inputs);
    if (failed.empty()) {
      program = candidate;
      break;
    }
  }
  if (!program) {
    const std::string why = !failed.empty() ? fmt::format("a guard failed: {} no longer holds", failed)
                                            : recompileReason(lastSignature_, signature);
    lastSignature_ = signature;
    if (compiles_ >= options_.cacheLimit) {
      if (!warnedLimit_) {
        std::fprintf(stderr,
                     "kiln::compile: the cache limit of %d programs is reached and %s; this call and further calls "
                     "that match no program run eagerly (raise CompileOptions::cacheLimit, or keep that argument's "
                     "type fixed)\n",
                     options_.cacheLimit, why.c_str());
        warnedLimit_ = true;
      }
      eagerFallbacks_++;
      return fn_(inputs);
    }
    if (compiles_ > 0)
      KILN_LOG_TO(recompiles, "kiln::compile: recompiling (program {} of at most {}): {}", compiles_ + 1,
                  options_.cacheLimit, why);
    // The new program runs now without testing its guards: they describe the
    // state its trace saw, which the trace itself may have changed (it
    // creates an optimizer's state, say).
    program = compileFor(inputs);
    candidates.push_back(program);
    compiles_++;
  }
  lastSignature_ = signature;
  last_ = program;
  if (const std::string alias = writtenAlias(*program, inputs); !alias.empty()) {
    // The trace saw the arguments as tensors of their own; eagerly this
    // call would see its own writes through them. Run it eagerly.
    if (!warnedAlias_) {
      std::fprintf(stderr, "kiln::compile: %s; this call and such calls run eagerly\n", alias.c_str());
      warnedAlias_ = true;
    }
    eagerFallbacks_++;
    return fn_(inputs);
  }
  return run(*program, inputs);
}

std::vector<Tensor> CompileEngine::run(const CompiledProgram& p, const std::vector<Tensor>& inputs) {
  // Note [Compiled arguments are contiguous]: a program is compiled for
  // contiguous inputs (its cache key is dtypes, shapes and devices only), so
  // a non-contiguous argument or capture is copied on entry, one copy kernel
  // each; a contiguous view is bound where it starts, without a copy.
  std::vector<Tensor> bound(p.exe.inputSlots.size());
  for (size_t i = 0; i < inputs.size(); ++i) bound[i] = inputs[i].contiguous();
  // The other inputs are bound in input order, which is trace order: random
  // draws advance their generator, per-call values run their host code
  // (Note [Per-call values] in frontend/trace.h).
  for (const InputBinding& b : p.bindings) {
    std::vector<Tensor> values = b.bind(inputs);
    for (size_t k = 0; k < b.inputs.size(); ++k) {
      KILN_CHECK(values.at(k).defined(), "compile: {} is undefined at this call", b.what);
      bound[static_cast<size_t>(b.inputs[k])] = values[k].contiguous();
    }
  }
  // Donated inputs are written during the run (Note [Donated buffers] in
  // codegen/compile_graph.cpp); no other input shares their storage, as
  // call() checked (writtenAlias).
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  std::vector<int64_t> offsets;
  for (const Tensor& t : bound) {
    KILN_ASSERT(t.defined(), "compile: a program input is not bound");
    buffers.push_back(t.impl()->storage);
    offsets.push_back(t.storageOffset() * itemSize(t.dtype()));
  }
  auto outs = p.exe.run(buffers, offsets);
  buffers.clear();
  std::vector<Tensor> values;
  for (size_t i = 0; i < outs.size(); ++i) {
    // A result that is an argument (or a capture) is that tensor, as in eager code.
    const auto slot = std::find(p.exe.inputSlots.begin(), p.exe.inputSlots.end(), p.exe.outputSlots[i]);
    if (slot != p.exe.inputSlots.end())
      values.push_back(bound[static_cast<size_t>(slot - p.exe.inputSlots.begin())]);
    else
      values.push_back(contiguousTensor(p.outputTypes[i], std::move(outs[i])));
  }
  outs.clear();
  bound.clear();
  // Writes into eager state, after every kernel ran (Note [Writes into eager state]).
  // Each write has an output of its own (TraceState::finish), so its value
  // can be moved out: storeInto may then take its storage.
  for (const TraceWrite& w : p.writes) {
    Tensor value = w.output < 0 ? Tensor() : std::move(values[static_cast<size_t>(w.output)]);
    if (w.kind == TraceWrite::Kind::grad)
      w.target.setGrad(value);
    else if (w.kind == TraceWrite::Kind::argumentGrad)
      inputs[static_cast<size_t>(w.input)].setGrad(value);
    else if (w.kind == TraceWrite::Kind::argument)
      storeInto(inputs[static_cast<size_t>(w.input)], std::move(value));
    else
      storeInto(w.target, std::move(value));
  }
  values.resize(static_cast<size_t>(p.numResults));
  return values;
}

std::string CompileEngine::lastGraph() const { return last_ ? last_->graphText : std::string(); }
int CompileEngine::lastNumKernels() const { return last_ ? last_->exe.numKernels() : 0; }
int CompileEngine::lastNumEpilogues() const { return last_ ? last_->exe.numEpilogues() : 0; }
std::vector<int> CompileEngine::lastCollectiveOverlaps() const {
  return last_ ? last_->exe.collectiveOverlaps() : std::vector<int>{};
}
runtime::ReplayInfo CompileEngine::lastReplay() const {
  return last_ ? last_->exe.replayInfo() : runtime::ReplayInfo{};
}

}  // namespace kiln::detail
