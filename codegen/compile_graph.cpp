// compileGraph: fusion nodes to kernel steps over buffer slots; graph inputs
// keep the layouts the caller gives, every other slot is contiguous.
#include "codegen/compile_graph.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_map>

#include "codegen/kernel_cache.h"
#include "codegen/lowering.h"
#include "codegen/lowering_library.h"
#include "codegen/lowering_reduction.h"
#include "codegen/plan_memory.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {
// Kernels split across threads in ranges of whole cache lines; tensors below
// this many elements run on one thread.
constexpr int64_t kGrain = 32768;

/// Whether `v` is read only by library calls, directly or through more
/// views, and is not returned.
bool readByLibraryCallsOnly(const ir::Value* v) {
  if (v->graph()->isOutput(v)) return false;
  for (const ir::Use& use : v->uses()) {
    const ir::Node* user = use.user;
    if (user->info().kind == ir::OpKind::library) continue;
    if (ir::isViewOp(user->op()) && readByLibraryCallsOnly(user->output())) continue;
    return false;
  }
  return true;
}
}  // namespace

bool supports(const ir::Node& node, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!node.owner()) return no("node without a graph");
  for (const ir::Value* v : node.inputs())
    if (!v->type().device.isCpu()) return no(fmt::format("input on {}", v->type().device.str()));
  switch (node.op()) {
    case ir::Op::fusion: return true;
    case ir::Op::constant: return true;  // folded into the kernels that read it
    case ir::Op::add:
    case ir::Op::sub:
    case ir::Op::mul:
    case ir::Op::div:
    case ir::Op::maximum:
    case ir::Op::minimum:
    case ir::Op::neg:
    case ir::Op::relu:
    case ir::Op::exp:
    case ir::Op::log:
    case ir::Op::sqrt:
    case ir::Op::tanh:
    case ir::Op::sigmoid:
    case ir::Op::pow:
    case ir::Op::abs:
    case ir::Op::rsqrt:
    case ir::Op::sin:
    case ir::Op::cos:
    case ir::Op::erf:
    case ir::Op::silu:
    case ir::Op::gelu:
    case ir::Op::cast:
    case ir::Op::eq:
    case ir::Op::ne:
    case ir::Op::lt:
    case ir::Op::le:
    case ir::Op::gt:
    case ir::Op::ge:
    case ir::Op::where:
    case ir::Op::dropout: return no("elementwise ops run inside fusion nodes (run fuse-elementwise first)");
    case ir::Op::reshape:
    case ir::Op::transpose:
    case ir::Op::slice:
    case ir::Op::expand:
      // Note [Library calls read views]: a view read only by library calls
      // is an alias of its input's slot with other strides.
      if (readByLibraryCallsOnly(node.output())) return true;
      return no(
          "movement ops run inside fusion nodes, unless only library calls read them (run fuse-elementwise first)");
    case ir::Op::cat: return no("movement ops run inside fusion nodes (run fuse-elementwise first)");
    case ir::Op::sum:
    case ir::Op::mean:
    case ir::Op::amax:
    case ir::Op::amin:
    case ir::Op::argmax:
    case ir::Op::var: return true;  // a kernel of one reduction (codegen/lowering_reduction.cpp)
    case ir::Op::matmul:
    case ir::Op::index_select:
    case ir::Op::index_add: return true;  // a library call (codegen/lowering_library.cpp)
  }
  return no("unknown op");
}

runtime::Executable compileGraph(const ir::Graph& graph, std::span<const ir::Strides> inputStrides) {
  for (const ir::Node* n : graph.nodes()) {
    std::string why;
    KILN_CHECK(supports(*n, &why), "codegen: cannot run {} on the cpu backend: {}", ir::opName(n->op()), why);
  }
  KILN_ASSERT(inputStrides.empty() || static_cast<int>(inputStrides.size()) == graph.numInputs(),
              "{} input layouts for a graph of {} inputs", inputStrides.size(), graph.numInputs());
  runtime::Executable exe;
  std::unordered_map<const ir::Value*, int> slot;
  std::unordered_map<const ir::Value*, ir::Layout> layout;  // of graph inputs; everything else is contiguous
  auto newSlot = [&](const ir::Value* v, int64_t elements) {
    exe.slots.push_back({static_cast<size_t>(elements * itemSize(v->type().dtype)), v->type().device});
    return slot[v] = static_cast<int>(exe.slots.size()) - 1;
  };
  for (int i = 0; i < graph.numInputs(); ++i) {
    const ir::Value* in = graph.input(i);
    ir::Layout l = inputStrides.empty() ? ir::contiguousLayout(in->type().shape) : ir::Layout{inputStrides[i], 0};
    KILN_ASSERT(l.strides.size() == in->type().shape.size(), "strides {} for input {}", ir::shapeStr(l.strides),
                in->type().str());
    exe.inputSlots.push_back(newSlot(in, ir::extent(in->type().shape, l.strides)));
    if (graph.isOutput(in))
      KILN_CHECK(ir::isContiguous(in->type().shape, l.strides),
                 "codegen: a graph that returns a non-contiguous input ({} with strides {}) is not supported",
                 in->type().str(), ir::shapeStr(l.strides));
    layout.emplace(in, std::move(l));
  }

  for (const ir::Node* n : graph.nodes()) {
    if (n->op() == ir::Op::constant) {
      for (const ir::Use& use : n->output()->uses())
        KILN_ASSERT(use.user->op() == ir::Op::fusion, "top-level constant read by {}", ir::opName(use.user->op()));
      KILN_CHECK(!graph.isOutput(n->output()), "codegen: a graph that returns a constant is not supported yet");
      continue;
    }
    std::vector<ir::Layout> inputs;
    for (const ir::Value* in : n->inputs()) {
      auto it = layout.find(in);
      inputs.push_back(it != layout.end() ? it->second : ir::contiguousLayout(in->type().shape));
    }
    if (ir::isViewOp(n->op())) {
      // Note [Library calls read views]: no step, the same slot seen
      // through the view's strides and offset.
      std::optional<ir::Layout> moved = ir::movedLayout(n->op(), n->attrs(), n->input(0)->type().shape, inputs[0]);
      KILN_CHECK(moved.has_value(), "codegen: {} of {} cannot be read as a view (run fuse-elementwise first)",
                 ir::opName(n->op()), n->input(0)->type().str());
      slot[n->output()] = slot.at(n->input(0));
      layout[n->output()] = std::move(*moved);
      continue;
    }
    if (n->info().kind == ir::OpKind::library) {
      LoweredCall lowered = lowerLibrary(*n, inputs);
      runtime::LibraryStep step;
      step.name = std::move(lowered.name);
      step.fn = lowered.fn;
      step.args = std::move(lowered.args);
      bool offsets = false;
      for (int i = 0; i < n->numInputs(); ++i) {
        step.slots.push_back(slot.at(n->input(i)));
        step.offsets.push_back(inputs[i].offset * itemSize(n->input(i)->type().dtype));
        offsets = offsets || inputs[i].offset != 0;
      }
      step.slots.push_back(newSlot(n->output(), n->output()->type().numel()));
      step.offsets.push_back(0);
      if (!offsets) step.offsets.clear();
      exe.steps.emplace_back(std::move(step));
      continue;
    }
    std::vector<int> outSlots;
    for (const ir::Value* out : n->outputs()) outSlots.push_back(newSlot(out, out->type().numel()));
    for (LoweredKernel& lowered : lowerKernels(*n, inputs)) {
      auto compiled = KernelCache::instance().cpu(lowered.kernel);
      runtime::KernelStep step;
      step.name = lowered.kernel.name;
      step.fn = compiled->fn;
      step.keepAlive = compiled;
      bool offsets = false;
      for (size_t p = 0; p < lowered.bindings.size(); ++p) {
        const ParamBinding& b = lowered.bindings[p];
        step.slots.push_back(b.output ? outSlots.at(b.index) : slot.at(n->input(b.index)));
        step.offsets.push_back(b.offset * itemSize(lowered.kernel.params[p].dtype));
        offsets = offsets || b.offset != 0;
      }
      if (!offsets) step.offsets.clear();
      // A reduction kernel splits by whole output rows (lowering_reduction.h).
      step.grain = lowered.kernel.isReduction() ? reductionGrain(lowered.kernel, lowered.launch) : kGrain;
      step.args = std::move(lowered.launch.args);
      step.numel = lowered.launch.numel;
      exe.steps.emplace_back(std::move(step));
    }
  }
  for (const ir::Value* out : graph.outputs()) exe.outputSlots.push_back(slot.at(out));
  planMemory(exe);  // Note [The memory plan is made over steps]
  return exe;
}

}  // namespace kiln::codegen
