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
//
// Movement ops (Note [Movement ops are read through]):
// - A chain of view ops (reshape, transpose, slice, expand) feeding a group
//   is copied into the group's body, so that the kernel reads the chain's
//   root through the chain's strides (ir/layout.h): a transpose feeding an
//   add is a strided load, no copy. Every group that reads a chain gets its
//   own copy of it; the original goes once nothing reads it.
// - A chain whose reshape cannot be a view of what it reads (a reshape of a
//   transpose that merges the swapped dimensions) is cut before that
//   reshape: the part above is materialized by a copy kernel, and the
//   reshape reads the copy, which is contiguous.
// - A view op whose result is returned, or read by anything but a view op,
//   a fusion that took it in or a library call, is materialized: a fusion
//   whose body is its chain, one copy kernel. Library calls (matmul, ...)
//   read their operands through strides themselves (Note [Library calls
//   read views] in codegen/compile_graph.h), so a chain into one stays in
//   place, unless its root is a constant (which has no buffer).
//
// Library calls are fusion boundaries (DESIGN.md §5): they are never
// grouped, their operands and results are materialized, and elementwise
// ops on either side fuse among themselves (matmul -> add -> relu is the
// matmul and one fusion of add and relu).
// - A cat is a fusion of its own with its inputs' chains in its body
//   (codegen: one copy kernel per input, each into its slice of the result).
//   So stack, a cat of unsqueezed inputs, copies each input once.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "ir/layout.h"
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

  /// Whether merging groups a and b would let a path leave them and re-enter,
  /// once every other group is one node: a path into one member of a group
  /// goes on from all of them (found by fuse-reductions' random test: two
  /// groups, each without a cycle of its own, can feed each other).
  bool wouldCycle(int a, int b) {
    std::unordered_set<const Node*> inside(members_[a].begin(), members_[a].end());
    inside.insert(members_[b].begin(), members_[b].end());
    std::vector<const Node*> stack;
    std::unordered_set<const Node*> seen;
    std::function<void(const Node*)> visit = [&](const Node* n) {
      if (inside.count(n) || !seen.insert(n).second) return;
      stack.push_back(n);
      for (const Node* m : members_[find(pos_.at(n))]) visit(m);
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

/// Replaces `members` by one fusion node whose body also holds copies of
/// `clones` (view ops feeding the members, left in place for other readers).
/// Its results are `results` when given (a copy of a view), else the
/// members' values used outside them or returned. The node goes before
/// `before`, or at the end.
Node* outline(Graph& graph, const std::vector<Node*>& members, const std::vector<Node*>& clones,
              std::vector<Value*> results = {}, Node* before = nullptr) {
  std::unordered_set<const Node*> inside(members.begin(), members.end());
  std::unordered_map<const Node*, int> order;
  for (Node* n : graph.nodes()) order.emplace(n, static_cast<int>(order.size()));
  std::vector<Node*> all = members;
  all.insert(all.end(), clones.begin(), clones.end());
  std::sort(all.begin(), all.end(), [&](Node* a, Node* b) { return order.at(a) < order.at(b); });
  auto body = std::make_unique<Graph>("fused");
  std::unordered_map<const Value*, Value*> mapped;
  std::vector<Value*> externals;
  for (Node* m : all) {
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
      } else if (!inside.count(m)) {
        // A view op reads a member's value: the kernel would have to compute
        // it at other indices. Merging refuses such groups (a path leaves
        // the group and comes back).
        KILN_ASSERT(!v->node() || !inside.count(v->node()), "a view op in a fusion body reads a computed value");
      }
      inputs.push_back(it->second);
    }
    std::vector<ir::TensorType> types;
    for (Value* out : m->outputs()) types.push_back(out->type());
    Node* copy = body->appendRaw(m->op(), inputs, types, m->attrs());
    for (int i = 0; i < m->numOutputs(); ++i) mapped[m->output(i)] = copy->output(i);
  }
  // Results: grouped values used outside the group or returned by the graph.
  if (results.empty())
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
  Node* fusion = graph.appendRaw(ir::Op::fusion, externals, types, {}, before);
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

bool isView(const Node* n) { return n && ir::isViewOp(n->op()); }
bool isLibraryCall(const Node* n) { return n->info().kind == ir::OpKind::library; }

/// The view ops from the root of v's chain (the first value not made by a
/// view op) down to v, in order; empty when v is not made by a view op.
std::vector<Node*> chainOf(Value* v) {
  std::vector<Node*> chain;
  for (; isView(v->node()); v = v->node()->input(0)) chain.push_back(v->node());
  std::reverse(chain.begin(), chain.end());
  return chain;
}

/// Whether the chain of view ops ending at `v` starts at a constant.
bool rootIsConstant(Value* v) {
  const std::vector<Node*> chain = chainOf(v);
  const Node* root = chain.front()->input(0)->node();
  return root && root->op() == ir::Op::constant;
}

/// Whether a kernel can read the chain ending at `n` through strides from
/// its root, which is contiguous (a graph input — kiln::compile binds
/// contiguous arguments —, a fusion result or a constant).
bool readsThrough(Node* n) {
  const std::vector<Node*> chain = chainOf(n->output());
  ir::Layout layout = ir::contiguousLayout(chain.front()->input(0)->type().shape);
  for (const Node* m : chain) {
    std::optional<ir::Layout> moved = ir::movedLayout(m->op(), m->attrs(), m->input(0)->type().shape, layout);
    if (!moved) return false;
    layout = std::move(*moved);
  }
  return true;
}

/// A copy kernel for view `v`: a fusion of its chain, before `before`,
/// which takes over every use of `v`.
Node* materialize(Graph& graph, Value* v, Node* before) { return outline(graph, {}, chainOf(v), {v}, before); }

/// Cuts chains that strides cannot read: the view op above such a reshape
/// is materialized, and the reshape reads the copy.
void cutChains(Graph& graph, PassContext& context) {
  for (Node* n : graph.nodes()) {
    if (!isView(n) || readsThrough(n)) continue;
    Node* above = n->input(0)->node();
    KILN_ASSERT(isView(above), "{} of a contiguous value is not a view", ir::opName(n->op()));
    materialize(graph, above->output(), n);
    context.remark(fmt::format("copied {} before {}: the strides cannot be read as {}", describe(above), describe(n),
                               ir::shapeStr(n->output()->type().shape)));
    context.count("movement-copies");
  }
}

/// The view ops feeding `members` (their chains), each once.
std::vector<Node*> chainsInto(const std::vector<Node*>& members) {
  std::vector<Node*> clones;
  std::unordered_set<const Node*> seen;
  for (const Node* m : members)
    for (Value* v : m->inputs())
      for (Node* c : chainOf(v))
        if (seen.insert(c).second) clones.push_back(c);
  return clones;
}

/// Removes view ops nobody reads any more, last first.
void eraseDeadViews(Graph& graph) {
  auto nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (isView(*it) && !(*it)->output()->hasUses() && !graph.isOutput((*it)->output())) graph.erase(*it);
}
}  // namespace

bool runFuseElementwise(Graph& graph, PassContext& context) {
  bool movement = false;
  for (Node* n : graph.nodes()) movement = movement || n->info().kind == ir::OpKind::movement;
  if (movement) cutChains(graph, context);
  std::vector<Node*> candidates;
  for (Node* n : graph.nodes())
    if (isElementwise(n)) candidates.push_back(n);
  if (candidates.empty() && !movement) return false;
  Grouping groups(graph.nodes(), isElementwise);
  std::vector<Node*> cats;
  for (Node* n : graph.nodes())
    if (n->op() == ir::Op::cat) cats.push_back(n);

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
    const std::vector<Node*> clones = chainsInto(members);
    if (!clones.empty()) {
      context.remark(fmt::format("read {} view op(s) through in the fusion of {}", clones.size(),
                                 describe(members.front())));
      context.count("movement-read-through", static_cast<int64_t>(clones.size()));
    }
    context.count("fusion-nodes");
    context.count("ops-fused", static_cast<int64_t>(members.size()));
    Node* fusion = outline(graph, members, clones);
    key[fusion] = last;
  }
  // A cat is a fusion of its own, with its inputs' chains read through.
  for (Node* n : cats) {
    const std::string what = describe(n);
    Node* fusion = outline(graph, {n}, chainsInto({n}));
    key[fusion] = key.at(n);
    context.remark(fmt::format("{} copies each input into its slice", what));
    context.count("fusion-nodes");
  }
  // What is left of the view ops: materialize those that are returned or
  // read by something that does not read through them, last first, so that
  // a chain is copied once from its root.
  eraseDeadViews(graph);
  for (;;) {
    Node* last = nullptr;
    for (Node* n : graph.nodes()) {
      if (!isView(n)) continue;
      bool needed = graph.isOutput(n->output());
      for (const ir::Use& use : n->output()->uses())
        needed = needed || !(isView(use.user) || (isLibraryCall(use.user) && !rootIsConstant(n->output())));
      if (needed) last = n;
    }
    if (!last) break;
    context.remark(fmt::format("copied {}: its result is needed in memory", describe(last)));
    context.count("movement-copies");
    Node* fusion = materialize(graph, last->output(), nullptr);
    key[fusion] = key.at(last);
    eraseDeadViews(graph);
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
