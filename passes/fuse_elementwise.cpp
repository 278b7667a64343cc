// fuse-elementwise: groups elementwise ops into fusion nodes (DESIGN.md §5).
//
// Rules of this first cut:
// - Every elementwise op ends up in a fusion node, alone or grouped, so that
//   codegen only ever lowers fusion nodes (eager runs a fusion of one).
// - A producer-consumer pair of elementwise ops fuses when both compute over
//   the same iteration domain (result shape and device; their dtypes may
//   differ, as across a cast or a comparison). A producer over a
//   smaller, broadcast domain is not fused: it would be recomputed once per
//   broadcast element (refused with a remark; to be measured).
// - Two groups merge only if no path leaves the pair and comes back into it
//   through another node: the merged group would depend on itself.
// - Groups that merely share an input (siblings) are not merged yet, so
//   such an input is read once per group.
// - Scalar constants are copied into every group that reads them, where they
//   become immediates; a constant left without uses is removed.
// - A grouped value used outside its group, or returned, becomes a result of
//   the fusion node (multi-output fusion); everything else stays in
//   registers. A group none of whose values is used is removed (a fusion
//   node needs a result). Every decision is recorded as a remark.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "passes/passes.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Value;

bool isElementwise(const Node* n) { return n->info().kind == ir::OpKind::elementwise; }

class Grouping {
 public:
  /// `nodes` is the whole graph in order; only `candidate` nodes are grouped.
  Grouping(const std::vector<Node*>& nodes, const std::function<bool(const Node*)>& candidate) : nodes_(nodes) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      pos_[nodes[i]] = static_cast<int>(i);
      if (candidate(nodes[i])) candidates_.insert(nodes[i]);
    }
    parent_.resize(nodes.size());
    std::iota(parent_.begin(), parent_.end(), 0);
    members_.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) members_[i] = {nodes[i]};
  }

  int group(const Node* n) { return find(pos_.at(n)); }
  const std::vector<Node*>& members(int group) const { return members_[group]; }
  bool contains(const Node* n) const { return candidates_.count(n) != 0; }
  int pos(const Node* n) const { return pos_.at(n); }

  /// Whether merging groups a and b would let a path leave them and re-enter.
  bool wouldCycle(int a, int b) {
    std::unordered_set<const Node*> inside(members_[a].begin(), members_[a].end());
    inside.insert(members_[b].begin(), members_[b].end());
    int last = 0;
    for (const Node* n : inside) last = std::max(last, pos_.at(n));
    std::vector<const Node*> stack;
    std::unordered_set<const Node*> seen;
    auto pushConsumers = [&](const Node* n) {
      for (const Value* out : n->outputs())
        for (const ir::Use& use : out->uses())
          if (!inside.count(use.user) && pos_.at(use.user) < last && seen.insert(use.user).second)
            stack.push_back(use.user);
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

  void merge(int a, int b) {
    a = find(a), b = find(b);
    if (members_[a].size() < members_[b].size()) std::swap(a, b);
    parent_[b] = a;
    members_[a].insert(members_[a].end(), members_[b].begin(), members_[b].end());
    members_[b].clear();
    std::sort(members_[a].begin(), members_[a].end(), [&](Node* x, Node* y) { return pos_[x] < pos_[y]; });
  }

 private:
  int find(int i) { return parent_[i] == i ? i : parent_[i] = find(parent_[i]); }

  std::vector<Node*> nodes_;
  std::unordered_map<const Node*, int> pos_;
  std::unordered_set<const Node*> candidates_;
  std::vector<int> parent_;
  std::vector<std::vector<Node*>> members_;
};

std::string describe(const Node* n) { return fmt::format("{}: {}", ir::opName(n->op()), n->output()->type().str()); }

/// Whether a value of the group is read outside it or returned.
bool anyResultEscapes(const Graph& graph, const std::vector<Node*>& members) {
  std::unordered_set<const Node*> inside(members.begin(), members.end());
  for (const Node* m : members)
    for (const Value* out : m->outputs()) {
      if (graph.isOutput(out)) return true;
      for (const ir::Use& use : out->uses())
        if (!inside.count(use.user)) return true;
    }
  return false;
}

/// Replaces the group's nodes by one fusion node appended at the end.
Node* outline(Graph& graph, const std::vector<Node*>& members) {
  std::unordered_set<const Node*> inside(members.begin(), members.end());
  auto body = std::make_unique<Graph>("fused");
  std::unordered_map<const Value*, Value*> mapped;
  std::vector<Value*> externals;
  for (Node* m : members) {
    std::vector<Value*> inputs;
    for (Value* v : m->inputs()) {
      auto it = mapped.find(v);
      if (it == mapped.end()) {
        Node* producer = v->node();
        Value* inner = nullptr;
        if (producer && producer->op() == ir::Op::constant) {
          inner = body->appendRaw(ir::Op::constant, {}, {v->type()}, producer->attrs())->output();
        } else {
          KILN_ASSERT(!producer || !inside.count(producer), "group member used before it is defined");
          inner = body->addInput(v->type());
          externals.push_back(v);
        }
        it = mapped.emplace(v, inner).first;
      }
      inputs.push_back(it->second);
    }
    std::vector<ir::TensorType> types;
    for (Value* out : m->outputs()) types.push_back(out->type());
    Node* copy = body->appendRaw(m->op(), inputs, types, m->attrs());
    for (int i = 0; i < m->numOutputs(); ++i) mapped[m->output(i)] = copy->output(i);
  }
  // Results: grouped values used outside the group or returned by the graph.
  std::vector<Value*> results;
  for (Node* m : members)
    for (Value* out : m->outputs()) {
      bool escapes = graph.isOutput(out);
      for (const ir::Use& use : out->uses()) escapes = escapes || !inside.count(use.user);
      if (escapes) results.push_back(out);
    }
  std::vector<Value*> bodyResults;
  std::vector<ir::TensorType> types;
  for (Value* r : results) {
    bodyResults.push_back(mapped.at(r));
    types.push_back(r->type());
  }
  body->setOutputs(bodyResults);
  Node* fusion = graph.appendRaw(ir::Op::fusion, externals, types);
  fusion->setBody(std::move(body));
  for (size_t i = 0; i < results.size(); ++i) graph.replaceAllUsesWith(results[i], fusion->output(static_cast<int>(i)));
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    // Uses between members were redirected to the fusion's results above;
    // drop them so that the members can go.
    Node* m = *it;
    for (Value* out : m->outputs()) {
      auto uses = out->uses();
      KILN_ASSERT(uses.empty(), "member still used after outlining");
    }
    graph.erase(m);
  }
  return fusion;
}
}  // namespace

bool runFuseElementwise(Graph& graph, PassContext& context) {
  std::vector<Node*> candidates;
  for (Node* n : graph.nodes())
    if (isElementwise(n)) candidates.push_back(n);
  if (candidates.empty()) return false;
  Grouping groups(graph.nodes(), isElementwise);

  for (Node* n : candidates) {
    for (Value* v : n->inputs()) {
      Node* p = v->node();
      if (!p || !groups.contains(p)) continue;
      int gp = groups.group(p), gn = groups.group(n);
      if (gp == gn) continue;
      // The domain is the shape (and device); dtypes may differ (cast, comparisons).
      if (p->output()->type().shape != n->output()->type().shape ||
          p->output()->type().device != n->output()->type().device) {
        context.remark(fmt::format("refused {} -> {}: different iteration domains", describe(p), describe(n)));
        context.count("refused-domain");
        continue;
      }
      if (groups.wouldCycle(gp, gn)) {
        context.remark(
            fmt::format("refused {} -> {}: a path leaves the group and comes back", describe(p), describe(n)));
        context.count("refused-cycle");
        continue;
      }
      groups.merge(gp, gn);
      context.remark(fmt::format("fused {} -> {}", describe(p), describe(n)));
      context.count("pairs-fused");
    }
  }

  // Outline each group; remember where its last member stood so that the
  // new order stays close to the old one.
  std::unordered_map<const Node*, int> key;
  const auto before = graph.nodes();
  for (size_t i = 0; i < before.size(); ++i) key[before[i]] = static_cast<int>(i);
  std::vector<Node*> roots;
  for (Node* n : candidates)
    if (groups.group(n) == groups.pos(n)) roots.push_back(n);
  for (Node* root : roots) {
    const auto& members = groups.members(groups.group(root));
    if (!anyResultEscapes(graph, members)) {
      // Nothing reads the group: a fusion node without results would be
      // invalid, and the group computes nothing anyone needs.
      context.remark(fmt::format("removed {} op(s) starting with {}: no result is used", members.size(),
                                 describe(members.front())));
      context.count("dead-ops-removed", static_cast<int64_t>(members.size()));
      for (auto it = members.rbegin(); it != members.rend(); ++it) graph.erase(*it);
      continue;
    }
    int last = key.at(members.back());
    Node* fusion = outline(graph, members);
    key[fusion] = last;
    context.count("fusion-nodes");
    context.count("ops-fused", static_cast<int64_t>(members.size()));
  }
  for (Node* n : graph.nodes())
    if (n->op() == ir::Op::constant && !n->output()->hasUses() && !graph.isOutput(n->output())) graph.erase(n);

  // Stable topological order: by key, each node after its producers.
  auto nodes = graph.nodes();
  std::stable_sort(nodes.begin(), nodes.end(), [&](Node* a, Node* b) { return key.at(a) < key.at(b); });
  std::vector<Node*> order;
  std::unordered_set<const Node*> placed;
  std::function<void(Node*)> place = [&](Node* n) {
    if (!placed.insert(n).second) return;
    for (Value* in : n->inputs())
      if (in->node()) place(in->node());
    order.push_back(n);
  };
  for (Node* n : nodes) place(n);
  graph.reorder(order);
  return true;
}

}  // namespace kiln::passes
