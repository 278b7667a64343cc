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

#include "passes/fusion_utils.h"
#include "passes/passes.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Value;

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

  /// Whether merging groups a and b would make a cycle (passes::wouldCycle;
  /// found by fuse-reductions' random test).
  bool wouldCycle(int a, int b) {
    NodeSet inside(members_[a].begin(), members_[a].end());
    inside.insert(members_[b].begin(), members_[b].end());
    return passes::wouldCycle(inside, [&](const Node* n) { return std::span<Node* const>(members_[group(n)]); });
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

bool isLibraryCall(const Node* n) { return n->info().kind == ir::OpKind::library; }

/// Whether the chain of view ops ending at `v` starts at a constant.
bool rootIsConstant(Value* v) {
  const std::vector<Node*> chain = chainOf(v);
  const Node* root = chain.front()->input(0)->node();
  return root && root->op() == ir::Op::constant;
}

/// A copy kernel for view `v`: a fusion of its chain, before `before`,
/// which takes over every use of `v`.
Node* materialize(Graph& graph, Value* v, Node* before) {
  ir::OutlineOptions options;
  options.copies = chainOf(v);
  options.results = {v};
  options.before = before;
  return graph.outline({}, options);
}

/// Cuts chains that strides cannot read: the view op above such a reshape
/// is materialized, and the reshape reads the copy.
void cutChains(Graph& graph, PassContext& context) {
  for (Node* n : graph.nodes()) {
    if (!isView(n) || chainLayout(chainOf(n->output()))) continue;
    Node* above = n->input(0)->node();
    KILN_ASSERT(isView(above), "{} of a contiguous value is not a view", ir::opName(n->op()));
    materialize(graph, above->output(), n);
    context.remark(fmt::format("copied {} before {}: the strides cannot be read as {}", describe(above), describe(n),
                               ir::shapeStr(n->output()->type().shape)));
    context.count("movement-copies");
  }
}

/// Removes view ops nobody reads any more, last first.
void eraseDeadViews(Graph& graph) { eraseUnused(graph, isView); }

/// Merges the groups of each producer-consumer pair of candidates over one
/// domain, unless that makes a cycle; a remark for each decision.
void mergePairs(const std::vector<Node*>& candidates, Grouping& groups, PassContext& context) {
  for (Node* n : candidates) {
    for (Value* v : n->inputs()) {
      Node* p = v->node();
      if (!p || !groups.contains(p)) continue;
      int gp = groups.group(p), gn = groups.group(n);
      if (gp == gn) continue;
      if (ir::isBarrier(p->op()) || ir::isBarrier(n->op())) {
        context.remark(fmt::format("refused {} -> {}: a barrier fuses with nothing", describe(p), describe(n)));
        context.count("refused-barrier");
        continue;
      }
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
}

/// Outlines each group with the view chains that feed it, keying its fusion
/// where its last member stood; removes a group nothing reads.
void outlineGroups(Graph& graph, const std::vector<Node*>& candidates, Grouping& groups,
                   std::unordered_map<const Node*, int>& key, PassContext& context) {
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
    std::vector<Node*> clones = chainsInto(members);
    if (!clones.empty()) {
      context.remark(
          fmt::format("read {} view op(s) through in the fusion of {}", clones.size(), describe(members.front())));
      context.count("movement-read-through", static_cast<int64_t>(clones.size()));
    }
    context.count("fusion-nodes");
    context.count("ops-fused", static_cast<int64_t>(members.size()));
    ir::OutlineOptions options;
    options.copies = std::move(clones);
    Node* fusion = graph.outline(members, options);
    key[fusion] = last;
  }
}

/// What is left of the view ops: materializes those that are returned or
/// read by something that does not read through them, last first, so that
/// a chain is copied once from its root.
void materializeViews(Graph& graph, std::unordered_map<const Node*, int>& key, PassContext& context) {
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
  mergePairs(candidates, groups, context);

  // Outline each group; remember where its last member stood so that the
  // new order stays close to the old one.
  std::unordered_map<const Node*, int> key = positions(graph);
  outlineGroups(graph, candidates, groups, key, context);
  // A cat is a fusion of its own, with its inputs' chains read through.
  for (Node* n : cats) {
    const std::string what = describe(n);
    const std::vector<Node*> cat{n};
    ir::OutlineOptions options;
    options.copies = chainsInto(cat);
    Node* fusion = graph.outline(cat, options);
    key[fusion] = key.at(n);
    context.remark(fmt::format("{} copies each input into its slice", what));
    context.count("fusion-nodes");
  }
  materializeViews(graph, key, context);
  eraseUnused(graph, isConstant);
  reorderByKey(graph, key);
  return true;
}

}  // namespace kiln::passes
