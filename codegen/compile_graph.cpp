// compileGraph: fusion nodes to kernel steps over buffer slots; graph inputs
// keep the layouts the caller gives, every other slot is contiguous.
#include "codegen/compile_graph.h"

#include <fmt/format.h>

#include <unordered_map>

#include "codegen/kernel_cache.h"
#include "codegen/lowering.h"
#include "codegen/lowering_reduction.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {
// Kernels split across threads in ranges of whole cache lines; tensors below
// this many elements run on one thread.
constexpr int64_t kGrain = 32768;
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
    case ir::Op::cast:
    case ir::Op::eq:
    case ir::Op::ne:
    case ir::Op::lt:
    case ir::Op::le:
    case ir::Op::gt:
    case ir::Op::ge:
    case ir::Op::where: return no("elementwise ops run inside fusion nodes (run fuse-elementwise first)");
    case ir::Op::reshape:
    case ir::Op::transpose:
    case ir::Op::slice:
    case ir::Op::expand:
    case ir::Op::cat: return no("movement ops run inside fusion nodes (run fuse-elementwise first)");
    case ir::Op::sum:
    case ir::Op::mean:
    case ir::Op::amax:
    case ir::Op::amin:
    case ir::Op::argmax:
    case ir::Op::var: return true;  // a kernel of one reduction (codegen/lowering_reduction.cpp)
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
      exe.steps.push_back(std::move(step));
    }
  }
  for (const ir::Value* out : graph.outputs()) exe.outputSlots.push_back(slot.at(out));
  return exe;
}

}  // namespace kiln::codegen
