// dispatch(): operand checks, then the eager path or the trace.
//
// Eager: the op becomes a one-node graph, fused (a fusion of one) and
// compiled like any other graph, so eager and compiled share every formula
// (Note [Eager equals compiled]). The executable is cached by op,
// attributes and input types; the kernel under it is cached by signature
// (codegen::KernelCache), so a new shape with the same pattern only lowers
// again and never recompiles.
#include "frontend/dispatch.h"

#include <fmt/format.h>

#include <mutex>
#include <unordered_map>

#include "codegen/compile_graph.h"
#include "frontend/trace.h"
#include "passes/pass_manager.h"
#include "runtime/error.h"

namespace kiln::detail {

namespace {
class EagerCache {
 public:
  std::shared_ptr<const runtime::Executable> get(const std::string& key) {
    std::lock_guard lock(mutex_);
    stats_.calls++;
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void put(const std::string& key, std::shared_ptr<const runtime::Executable> exe) {
    std::lock_guard lock(mutex_);
    if (map_.size() >= kCapacity) map_.clear();  // shapes churn: start over
    map_.emplace(key, std::move(exe));
    stats_.graphsBuilt++;
  }
  EagerStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  static constexpr size_t kCapacity = 4096;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const runtime::Executable>> map_;
  EagerStats stats_;
};

EagerCache& eagerCache() {
  static auto* cache = new EagerCache();
  return *cache;
}

std::shared_ptr<const runtime::Executable> buildEager(ir::Op op, const std::vector<ir::TensorType>& types,
                                                      const ir::Attributes& attrs) {
  ir::Graph g(fmt::format("eager_{}", ir::opName(op)));
  std::vector<ir::Value*> inputs;
  for (const auto& t : types) inputs.push_back(g.addInput(t));
  ir::Node* node = g.create(op, inputs, attrs);
  g.setOutputs({node->outputs().begin(), node->outputs().end()});
  passes::PassManager("fuse-elementwise").run(g);
  return std::make_shared<const runtime::Executable>(codegen::compileGraph(g));
}

Tensor runEager(ir::Op op, std::vector<Operand>& operands, const ir::Attributes& attrs, const ir::TensorType& out,
                const std::vector<ir::TensorType>& types) {
  std::string key = fmt::format("{}", static_cast<int>(op));
  for (const auto& [name, value] : attrs) key += fmt::format("|{}={}", name, ir::attrStr(value));
  for (const auto& t : types) key += "|" + t.str();
  auto exe = eagerCache().get(key);
  if (!exe) {
    exe = buildEager(op, types, attrs);
    eagerCache().put(key, exe);
  }
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  for (Operand& o : operands) buffers.push_back(o.tensor.impl()->storage);
  auto outputs = exe->run(buffers);
  auto impl = std::make_shared<TensorImpl>();
  impl->type = out;
  impl->storage = std::move(outputs.at(0));
  return Tensor(std::move(impl));
}
}  // namespace

EagerStats eagerStats() { return eagerCache().stats(); }

Tensor dispatch(ir::Op op, std::vector<Operand> operands, const ir::Attributes& attrs) {
  const std::string_view name = ir::opName(op);
  const Tensor* first = nullptr;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].isScalar) continue;
    KILN_CHECK(operands[i].tensor.defined(), "{}: argument {} is an undefined tensor", name, i);
    if (!first) first = &operands[i].tensor;
  }
  KILN_ASSERT(first, "{} called with scalars only", name);
  TraceState* trace = TraceState::current();
  for (const Operand& o : operands)
    KILN_CHECK(o.isScalar || trace || !o.tensor.isTraced(),
               "{}: {} was produced while tracing (kiln::compile) and has no value outside the trace", name,
               o.tensor.str());

  if (trace) {
    std::vector<ir::Value*> inputs;
    for (Operand& o : operands)
      inputs.push_back(o.isScalar ? trace->graph->createConstant(o.scalar, {first->dtype(), {}, first->device()})->output()
                                  : trace->valueOf(o.tensor, name.data()));
    ir::Node* node = trace->graph->create(op, inputs, attrs);
    return trace->wrap(node->output());
  }

  // Scalars become 0-d tensors so that one kernel serves every scalar value.
  for (Operand& o : operands)
    if (o.isScalar) o.tensor = full({}, o.scalar, first->dtype(), first->device());
  std::vector<ir::TensorType> types;
  for (const Operand& o : operands) types.push_back(o.tensor.type());
  ir::TensorType out = ir::inferType(op, types, attrs);
  return runEager(op, operands, attrs, out, types);
}

}  // namespace kiln::detail
