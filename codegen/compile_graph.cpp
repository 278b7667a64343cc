// compileGraph: fusion nodes to kernel steps over buffer slots.
#include "codegen/compile_graph.h"

#include <fmt/format.h>

#include <unordered_map>

#include "codegen/kernel_cache.h"
#include "codegen/lowering.h"
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
    case ir::Op::transpose: return no("movement ops are not supported by codegen yet");
  }
  return no("unknown op");
}

runtime::Executable compileGraph(const ir::Graph& graph) {
  for (const ir::Node* n : graph.nodes()) {
    std::string why;
    KILN_CHECK(supports(*n, &why), "codegen: cannot run {} on the cpu backend: {}", ir::opName(n->op()), why);
  }
  runtime::Executable exe;
  std::unordered_map<const ir::Value*, int> slot;
  auto newSlot = [&](const ir::Value* v) {
    exe.slots.push_back({static_cast<size_t>(v->type().numel() * itemSize(v->type().dtype)), v->type().device});
    return slot[v] = static_cast<int>(exe.slots.size()) - 1;
  };
  for (const ir::Value* in : graph.inputs()) exe.inputSlots.push_back(newSlot(in));

  for (const ir::Node* n : graph.nodes()) {
    if (n->op() == ir::Op::constant) {
      for (const ir::Use& use : n->output()->uses())
        KILN_ASSERT(use.user->op() == ir::Op::fusion, "top-level constant read by {}", ir::opName(use.user->op()));
      KILN_CHECK(!graph.isOutput(n->output()), "codegen: a graph that returns a constant is not supported yet");
      continue;
    }
    LoweredKernel lowered = lowerFusion(*n);
    auto compiled = KernelCache::instance().cpu(lowered.kernel);
    runtime::KernelStep step;
    step.name = lowered.kernel.name;
    step.fn = compiled->fn;
    step.keepAlive = compiled;
    for (const ir::Value* in : n->inputs()) step.slots.push_back(slot.at(in));
    for (const ir::Value* out : n->outputs()) step.slots.push_back(newSlot(out));
    step.args = std::move(lowered.launch.args);
    step.numel = lowered.launch.numel;
    step.grain = kGrain;
    exe.steps.push_back(std::move(step));
  }
  for (const ir::Value* out : graph.outputs()) exe.outputSlots.push_back(slot.at(out));
  return exe;
}

}  // namespace kiln::codegen
