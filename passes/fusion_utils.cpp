// The helpers the fusion passes share (passes/fusion_utils.h).
#include "passes/fusion_utils.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::passes {

using ir::Graph;
using ir::Node;
using ir::Value;

std::string describe(const Node* n) { return fmt::format("{}: {}", ir::opName(n->op()), n->output()->type().str()); }
bool isElementwise(const Node* n) { return n->info().kind == ir::OpKind::elementwise; }
bool isView(const Node* n) { return n && ir::isViewOp(n->op()); }
bool isConstant(const Node* n) { return n && n->op() == ir::Op::constant; }

std::vector<Node*> chainOf(Value* v) {
  std::vector<Node*> chain;
  for (; isView(v->node()); v = v->node()->input(0)) chain.push_back(v->node());
  std::reverse(chain.begin(), chain.end());
  return chain;
}

std::optional<ir::Layout> chainLayout(std::span<Node* const> chain) {
  ir::Layout layout = ir::contiguousLayout(chain.front()->input(0)->type().shape);
  for (const Node* m : chain) {
    std::optional<ir::Layout> moved = ir::movedLayout(m->op(), m->attrs(), m->input(0)->type().shape, layout);
    if (!moved) return std::nullopt;
    layout = std::move(*moved);
  }
  return layout;
}

std::vector<Node*> chainsInto(std::span<Node* const> members) {
  const NodeSet inside(members.begin(), members.end());
  std::vector<Node*> chains;
  NodeSet seen;
  for (const Node* m : members)
    for (Value* v : m->inputs()) {
      std::vector<Node*> chain;
      for (Node* p = v->node(); isView(p) && !inside.count(p); p = p->input(0)->node()) chain.push_back(p);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        if (seen.insert(*it).second) chains.push_back(*it);
    }
  return chains;
}

bool wouldCycle(const NodeSet& inside, const std::function<std::span<Node* const>(const Node*)>& groupOf) {
  std::vector<const Node*> stack;
  NodeSet seen;
  std::function<void(const Node*)> visit = [&](const Node* n) {
    if (inside.count(n) || !seen.insert(n).second) return;
    stack.push_back(n);
    for (const Node* m : groupOf(n)) visit(m);
  };
  auto pushConsumers = [&](const Node* n) {
    for (const Value* out : n->outputs())
      for (const ir::Use& use : out->uses()) visit(use.user);
  };
  for (const Node* n : inside) pushConsumers(n);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Value* out : n->outputs())
      for (const ir::Use& use : out->uses())
        if (inside.count(use.user)) return true;
    pushConsumers(n);
  }
  return false;
}

std::unordered_map<const Node*, int> positions(const Graph& graph) {
  std::unordered_map<const Node*, int> key;
  for (const Node* n : graph.nodes()) key.emplace(n, static_cast<int>(key.size()));
  return key;
}

void eraseUnused(Graph& graph, const std::function<bool(const Node*)>& which) {
  const std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (which(*it) && !(*it)->output()->hasUses() && !graph.isOutput((*it)->output())) graph.erase(*it);
}

void reorderByKey(Graph& graph, const std::unordered_map<const Node*, int>& key) {
  std::vector<Node*> nodes = graph.nodes();
  std::stable_sort(nodes.begin(), nodes.end(), [&](Node* a, Node* b) { return key.at(a) < key.at(b); });
  std::vector<Node*> order;
  NodeSet placed;
  std::function<void(Node*)> place = [&](Node* n) {
    if (!placed.insert(n).second) return;
    for (Value* in : n->inputs())
      if (in->node()) place(in->node());
    order.push_back(n);
  };
  for (Node* n : nodes) place(n);
  graph.reorder(order);
}

}  // namespace kiln::passes
