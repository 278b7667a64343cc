// dce: removes nodes none of whose results is used or returned.
//
// Walks the nodes last to first, so that a chain of dead nodes goes in one
// run: removing a dead consumer makes its producer dead before it is visited.
#include "passes/passes.h"

namespace kiln::passes {

bool runDce(ir::Graph& graph, PassContext& context) {
  bool changed = false;
  auto nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    ir::Node* node = *it;
    bool used = false;
    for (ir::Value* out : node->outputs()) used = used || out->hasUses() || graph.isOutput(out);
    if (used) continue;
    graph.erase(node);
    context.count("nodes-removed");
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes
