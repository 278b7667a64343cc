// fold-constants: an elementwise node whose inputs are all constants becomes
// the constant it computes (DESIGN.md §5).
//
// A constant is a scalar filled to its result type, so an elementwise op on
// constants computes the same value at every element: the result is again a
// fill, of the node's result type (add(constant 1 : f32[4,8], constant 2 :
// f32[]) is constant 3 : f32[4,8]). The value comes from ir::evalScalarF32,
// the scalar formulas every kernel runs, so folding never changes a result
// (Note [Eager equals compiled]): a constant is read by kernels as
// static_cast<float>(value), the fold computes on those floats and stores the
// float result, which converts to double and back exactly.
//
// Only f32 is folded (the only dtype with formulas so far), only in the
// top-level graph (fusion bodies are left alone), and nodes visit in order so
// that a chain of constants folds in one run. A constant left without uses by
// a fold is removed.
#include <algorithm>
#include <vector>

#include "ir/scalar_eval.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Value;

bool isElementwise(const Node* n) {
  switch (n->info().kind) {
    case ir::OpKind::elementwise: return true;
    case ir::OpKind::reduction:
    case ir::OpKind::movement:
    case ir::OpKind::library:
    case ir::OpKind::random:
    case ir::OpKind::control:
    case ir::OpKind::constant: return false;
  }
  return false;
}

bool isF32Constant(const Value* v) {
  return v->node() && v->node()->op() == ir::Op::constant && v->type().dtype == DType::f32;
}

/// Whether `n` is an f32 elementwise node whose inputs are all constants.
bool foldable(const Node* n) {
  if (!isElementwise(n) || n->numOutputs() != 1 || n->output()->type().dtype != DType::f32) return false;
  return std::all_of(n->inputs().begin(), n->inputs().end(), isF32Constant);
}

/// The f32 a constant node stands for, as kernels read it.
float constantValue(const Value* v) {
  return static_cast<float>(ir::floatAttr(v->node()->attrs(), "value", "constant"));
}
}  // namespace

bool runFoldConstants(Graph& graph, PassContext& context) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (!foldable(n)) continue;
    std::vector<float> inputs;
    std::vector<Node*> producers;
    for (Value* v : n->inputs()) {
      inputs.push_back(constantValue(v));
      if (std::find(producers.begin(), producers.end(), v->node()) == producers.end()) producers.push_back(v->node());
    }
    const float result = ir::evalScalarF32(n->op(), inputs, n->attrs());
    Node* folded = graph.createConstant(static_cast<double>(result), n->output()->type(), n);
    folded->output()->setName(n->output()->name());
    graph.replaceAllUsesWith(n->output(), folded->output());
    graph.erase(n);
    for (Node* p : producers)
      if (!p->output()->hasUses() && !graph.isOutput(p->output())) graph.erase(p);
    context.count("nodes-folded");
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes
