// fold-constants: an elementwise node whose inputs are all constants becomes
// the constant it computes (DESIGN.md §5).
//
// A constant is a scalar filled to its result type, so an elementwise op on
// constants computes the same value at every element: the result is again a
// fill, of the node's result type (add(constant 1 : f32[4,8], constant 2 :
// f32[]) is constant 3 : f32[4,8]). The value comes from ir::evalScalar, the
// scalar formulas every kernel runs, so folding never changes a result
// (Note [Eager equals compiled]): each input is the value a kernel reads
// (ir::constantValue: an f32 constant is static_cast<float>(value), an
// integer one its exact int), and the result is written back in the same
// form: a float of every float dtype converts to double and back exactly,
// an integer stays an int (Note [Integer constants are exact]).
//
// Every dtype folds; an op that reads the element's index (dropout) does
// not, since its result is no fill. Only the top-level graph is folded
// (fusion bodies are left alone), and nodes visit in order so that a chain
// of constants folds in one run. A constant left without uses by a fold is
// removed.
#include <algorithm>
#include <vector>

#include "ir/scalar_eval.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Value;

bool isConstant(const Value* v) { return v->node() && v->node()->op() == ir::Op::constant; }

/// Whether `n` is an elementwise node of one result whose inputs are all
/// constants and whose value is a function of theirs.
bool foldable(const Node* n) {
  if (n->info().kind != ir::OpKind::elementwise || n->numOutputs() != 1 || ir::usesElementIndex(n->op())) return false;
  return std::all_of(n->inputs().begin(), n->inputs().end(), isConstant);
}

/// The value a constant node stands for, as kernels read it.
ir::ScalarValue constantValue(const Value* v) {
  const DType dtype = v->type().dtype;
  const ir::Number n = ir::constantValue(v->node()->attrs(), dtype);
  if (const int64_t* i = std::get_if<int64_t>(&n)) return ir::ScalarValue::ofInt(dtype, *i);
  return ir::ScalarValue::of(dtype, std::get<double>(n));
}

/// `value` as a constant's attribute: an int for integer and bool dtypes.
ir::Number numberOf(const ir::ScalarValue& value) {
  return isFloatingPoint(value.dtype) ? ir::Number(value.f) : ir::Number(value.i);
}
}  // namespace

bool runFoldConstants(Graph& graph, PassContext& context) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (!foldable(n)) continue;
    std::vector<ir::ScalarValue> inputs;
    std::vector<Node*> producers;
    for (Value* v : n->inputs()) {
      inputs.push_back(constantValue(v));
      if (std::find(producers.begin(), producers.end(), v->node()) == producers.end()) producers.push_back(v->node());
    }
    const ir::ScalarValue result = ir::evalScalar(n->op(), inputs, n->attrs());
    Node* folded = graph.createConstant(numberOf(result), n->output()->type(), n);
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
