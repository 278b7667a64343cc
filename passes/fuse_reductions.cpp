// fuse-reductions: groups each row reduction with its elementwise
// producers (the prologue) and consumers (the epilogue), and reductions over
// the same rows with each other, into one fusion node: one kernel per row
// (DESIGN.md §5; docs/fusion.md has the rules with irdump examples).
//
// It runs before fuse-elementwise, on unfused ops, and takes the ops around
// reductions; fuse-elementwise then groups what is left. A group is what
// ir/reduction_fusion.h allows (the verifier checks it, lowering relies on
// it). Rules:
// - Rows: a group holds reductions of one shape D over one set of dims.
//   Reductions over other rows (a column sum next to a row sum, a sum of
//   the row sums) are other groups: refused with a remark, "different
//   rows". A reduction whose reduced dims all have size 1 is not fused
//   (rows of one element: shapes could not tell a row from its result).
// - Growth: from each reduction, in graph order, the group takes
//   producers and consumers that are elementwise ops over D (row values:
//   relu(x) before amax(x), x - amax(x) after it) or over the reductions'
//   result shape K (keepdim) or Q (without it): values per row, such as
//   log(sum) or var + eps; other reductions over the same rows; and
//   reshapes of values per row between K and Q. Anything else stops it.
// - Indexing: a value per row must be read per row: `x - amax(x, keepdim)`
//   fuses, `x[4,4] - sum(x, 1)[4]` (the sums broadcast along each row)
//   does not ("reads ... along the row"); a view of a value of the group
//   (a transpose of a fused result) is not fused either. Either way the
//   value is materialized (a result of the fusion) and read from memory.
// - Materialization: a value of the group that something outside it needs
//   (another group, a view op, a graph output) is a result of the fusion
//   node, stored once where it is computed; values are never recomputed in
//   two kernels. So relu's output needed by backward is stored by the
//   layer norm's kernel, and a layer norm backward's g * xhat, needed by
//   the column sums of the weight gradient, is stored by the row kernel.
// - Cycles: a node joins only if no path leaves the group and comes back
//   to it (the fusion would depend on itself); refused with a remark.
// - Column rows (Note [Column rows]): a reduction over rows that are
//   columns (the innermost dim kept: a bias gradient's sum over the batch)
//   takes no producer over D that something outside the group needs too:
//   its kernel walks each row with a stride, so it would store that value
//   one element per cache line, where an elementwise kernel streams it.
//   Producers only it reads, consumers and per-row values (an optimizer's
//   update of the summed bias) still fuse. Measured on the MLP train step:
//   a ReLU backward (also read by the next matmul) fused into the bias
//   gradient's column sum took 4.5 ms, the two kernels 0.1 + 0.7 ms.
// - Summation order: a fused kernel must add each float sum in the order
//   eager's kernel of that sum adds it (Note [Rows walked as eager walks
//   them] below): the same runs of the row, and in vector lanes or in
//   sequence as eager does. A node that would change it is refused.
// - Same rows: groups over the same rows merge when that makes no cycle
//   (mean and var of a layer norm, amax and sum of a softmax, the two
//   column sums of a layer norm backward).
// - Distance: a group never spans a library call or collective: no node
//   joins it, and no two groups merge, across one in graph order. A kernel
//   runs where its last member stands, so such a group would keep the
//   inputs of its first members alive across the call: every layer's bias
//   gradient sums fused into the optimizer's update at the end of the step
//   held each layer's [rows, features] gradient to the end (activation
//   checkpointing's memory saving undone with it).
// - Views: chains of view ops (reshape, transpose, slice, expand) from a
//   graph input, constant or other fusion's result into the group are
//   copied into the body and read through strides, as fuse-elementwise
//   does, when strides can read them.
//
// Statistics: fusion-nodes, reductions-fused, ops-fused, groups-merged,
// refused-rows, refused-domain, refused-indexing, refused-row-order,
// refused-cycle, refused-distance, refused-one-element-rows, refused-column-rows,
// dead-ops-removed. `irdump --remarks` prints each decision.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/layout.h"
#include "ir/reduction_fusion.h"
#include "passes/fusion_utils.h"
#include "passes/passes.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Value;

/// Whether a kernel walks the rows with a stride (they are columns): the
/// innermost dim of D longer than 1 is kept, not reduced.
bool columnRows(const ir::RowDomain& rows) {
  for (size_t d = rows.domain.size(); d-- > 0;)
    if (rows.domain[d] != 1) return !rows.reduced[d];
  return false;
}

struct Group {
  ir::RowDomain rows;
  std::vector<Node*> members;
  std::unordered_set<const Node*> inside;
  bool alive = true;
};

class Fuser {
 public:
  Fuser(Graph& graph, PassContext& context) : graph_(graph), context_(context), position_(positions(graph)) {
    for (const Node* n : graph.nodes())
      if (n->info().kind == ir::OpKind::library || n->info().kind == ir::OpKind::collective) calls_.push_back(n);
  }

  /// Builds the groups; returns them in the order of their first reduction.
  std::vector<Group>& run() {
    for (Node* n : graph_.nodes()) {
      if (!ir::isReduction(n->op()) || groupOf_.count(n)) continue;
      const ir::RowDomain rows = ir::rowDomainOf(*n);
      if (rows.degenerate()) {
        context_.remark(fmt::format("left {} alone: its rows have one element", describe(n)));
        context_.count("refused-one-element-rows");
        continue;
      }
      groups_.push_back(Group{rows, {}, {}, true});
      add(static_cast<int>(groups_.size()) - 1, n, "seeded a fusion with");
      grow(static_cast<int>(groups_.size()) - 1);
    }
    // Groups over the same rows merge (then grow again: the union may
    // reach nodes neither reached alone).
    for (size_t a = 0; a < groups_.size(); ++a) {
      for (size_t b = a + 1; b < groups_.size() && groups_[a].alive; ++b) {
        if (!groups_[b].alive || !(groups_[a].rows == groups_[b].rows)) continue;
        if (const Node* call = callBetween(groups_[a], groups_[b])) {
          context_.remark(fmt::format("kept the fusions of {} and {} apart: {} lies between them",
                                      describe(groups_[a].members.front()), describe(groups_[b].members.front()),
                                      describe(call)));
          context_.count("refused-distance");
          continue;
        }
        std::unordered_set<const Node*> both = groups_[a].inside;
        both.insert(groups_[b].inside.begin(), groups_[b].inside.end());
        if (auto problem = indexingProblem(both, groups_[a].rows)) {
          context_.remark(fmt::format("kept the fusions of {} and {} apart: {}", describe(groups_[a].members.front()),
                                      describe(groups_[b].members.front()), problem->first));
          context_.count(problem->second);
          continue;
        }
        if (auto problem = rowOrderProblem(both, groups_[a].rows)) {
          context_.remark(fmt::format("kept the fusions of {} and {} apart: {}", describe(groups_[a].members.front()),
                                      describe(groups_[b].members.front()), *problem));
          context_.count("refused-row-order");
          continue;
        }
        if (wouldCycle(both)) {
          context_.remark(fmt::format("kept the fusions of {} and {} apart: a path leaves one and enters the other",
                                      describe(groups_[a].members.front()), describe(groups_[b].members.front())));
          context_.count("refused-cycle");
          continue;
        }
        for (Node* m : groups_[b].members) {
          groups_[a].members.push_back(m);
          groups_[a].inside.insert(m);
          groupOf_[m] = static_cast<int>(a);
        }
        groups_[b].alive = false;
        context_.remark(fmt::format("merged the fusions of {} and {}: they reduce the same rows",
                                    describe(groups_[a].members.front()), describe(groups_[b].members.front())));
        context_.count("groups-merged");
        queue_ = groups_[a].members;
        grow(static_cast<int>(a));
      }
    }
    reportRefusals();
    return groups_;
  }

 private:
  /// Whether `inside` has a path that leaves it and comes back (passes::wouldCycle).
  bool wouldCycle(const NodeSet& inside) const {
    return passes::wouldCycle(inside, [&](const Node* n) {
      auto g = groupOf_.find(n);
      if (g == groupOf_.end()) return std::span<Node* const>();
      return std::span<Node* const>(groups_[static_cast<size_t>(g->second)].members);
    });
  }

  void add(int g, Node* n, std::string_view how) {
    Group& group = groups_[static_cast<size_t>(g)];
    group.members.push_back(n);
    group.inside.insert(n);
    groupOf_[n] = g;
    queue_.push_back(n);
    context_.remark(fmt::format("{} {}", how, describe(n)));
    if (ir::isReduction(n->op()))
      context_.count("reductions-fused");
    else
      context_.count("ops-fused");
  }

  /// Whether the nodes `inside`, over `rows`, compute `v` as a value per row.
  static bool isOuterMember(const std::unordered_set<const Node*>& inside, const ir::RowDomain& rows, const Value* v) {
    return v->node() && inside.count(v->node()) && rows.isOuterShape(v->type().shape);
  }

  /// Whether `n` is a cast over a smaller shape broadcast along the rows
  /// (a weight's type promotion) that only members read: recomputing a
  /// conversion along each row costs less than a kernel and a round trip
  /// through memory.
  bool isBroadcastCast(const Group& group, const Node* n) const {
    const ir::Shape& s = n->output()->type().shape;
    // (A cast keeps its input's shape, so its input is no member either.)
    if (n->op() != ir::Op::cast || s == group.rows.domain || group.rows.isOuterShape(s) ||
        ir::broadcastShapes(s, group.rows.domain) != group.rows.domain || graph_.isOutput(n->output()))
      return false;
    for (const ir::Use& use : n->output()->uses())
      if (!group.inside.count(use.user)) return false;
    return true;
  }

  /// Records why `n` did not join `group` (yet): said at the end if it never does.
  void refuse(const Node* n, const Group& group, const std::string& why, const char* statistic) {
    const int g = static_cast<int>(&group - groups_.data());
    for (Refusal& r : refusals_)
      if (r.node == n && r.group == g) {
        r.why = why;
        r.statistic = statistic;
        return;
      }
    refusals_.push_back({n, g, why, statistic});
  }

  /// The refusals that stood: nodes that never joined the group that refused them.
  void reportRefusals() {
    for (const Refusal& r : refusals_) {
      auto in = groupOf_.find(r.node);
      if (in != groupOf_.end() && in->second == r.group) continue;
      context_.remark(fmt::format("refused {} for the fusion of {}: {}", describe(r.node),
                                  describe(groups_[static_cast<size_t>(r.group)].members.front()), r.why));
      context_.count(r.statistic);
    }
  }

  /// Why member `n` of the nodes `inside` cannot read its operand `v`, or
  /// nullopt. `along`: n is a row value or a reduction.
  static std::optional<std::pair<std::string, const char*>> operandProblem(
      const std::unordered_set<const Node*>& inside, const ir::RowDomain& rows, const Node* n, Value* v, bool along) {
    const Node* p = v->node();
    if (p && inside.count(p)) {
      if (!isOuterMember(inside, rows, v)) return std::nullopt;
      const ir::Shape& context = along ? rows.domain : n->output()->type().shape;
      if (rows.readsPerRow(v->type().shape, context)) return std::nullopt;
      return std::pair{fmt::format("{} reads {} of the fusion along {} otherwise than per row", describe(n),
                                   v->type().str(), ir::shapeStr(context)),
                       "refused-indexing"};
    }
    if (!isView(p)) return std::nullopt;
    const std::vector<Node*> chain = chainOf(v);
    const Node* root = chain.front()->input(0)->node();
    if (root && inside.count(root))
      return std::pair{
          fmt::format("{} reads a view ({}) of a value of the fusion", describe(n), describe(chain.back())),
          "refused-indexing"};
    if (!chainLayout(chain))
      return std::pair{fmt::format("strides cannot read the view {}", describe(chain.back())), "refused-indexing"};
    return std::nullopt;
  }

  /// The first member of `inside` that cannot read one of its operands
  /// (checked over the whole set: a node that joins later can make an
  /// earlier member's read invalid, and so can a merge).
  std::optional<std::pair<std::string, const char*>> indexingProblem(const std::unordered_set<const Node*>& inside,
                                                                     const ir::RowDomain& rows) const {
    for (const Node* m : graph_.nodes()) {
      if (!inside.count(m)) continue;
      if (m->op() == ir::Op::reshape) continue;  // of a value per row, to K or Q
      const bool along = ir::isReduction(m->op()) || !rows.isOuterShape(m->output()->type().shape);
      for (Value* v : m->inputs())
        if (auto problem = operandProblem(inside, rows, m, v, along)) return problem;
    }
    return std::nullopt;
  }

 public:
  /// Note [Rows walked as eager walks them]: a float sum's bits depend on
  /// the order it adds in, and a CPU kernel adds each run of its row loop
  /// nest (the reduced dims, coalesced over every parameter's strides) in
  /// a fixed vectorized order (Note [Fixed summation order] in
  /// codegen/llvm_reduction.cpp). Eagerly, a reduction's kernel walks its
  /// operand alone: a computed operand is contiguous, so adjacent reduced
  /// dims merge into one run. A fused kernel walks every operand of the
  /// group; one that varies along some reduced dims and not along others
  /// (a [C] bias in a sum over dims [B, C]) splits the runs, and the sum
  /// would round differently. And a kernel that walks any row with a
  /// stride other than 0 or 1 (a column, a transposed view) adds its sums
  /// in sequence, others in vector lanes: the fused kernel of a sum must
  /// do as eager's does. A node that breaks either is refused.
  std::optional<std::string> rowOrderProblem(const std::unordered_set<const Node*>& inside,
                                             const ir::RowDomain& rows) const {
    auto stridesOf = [&](Value* v) -> std::vector<int64_t> {
      // Over D, as a kernel reads v: through its view chain from a
      // contiguous root, or contiguous; 0 along broadcast dims.
      ir::Shape shape = v->type().shape;
      ir::Layout layout = ir::contiguousLayout(shape);
      if (!(v->node() && inside.count(v->node()))) {
        const std::vector<Node*> chain = chainOf(v);
        if (!chain.empty()) layout = *chainLayout(chain);  // readable: indexingProblem checked it
      }
      std::vector<int64_t> out(rows.domain.size(), 0);
      const size_t lead = rows.domain.size() - shape.size();
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] != 1) out[lead + i] = layout.strides[i];
      return out;
    };
    // codegen::coalesce over the reduced dims (size-1 dims dropped,
    // neighbours merged where every access walks them as one): the runs'
    // sizes, and whether an access walks the innermost run with a stride
    // other than 0 and 1 (which makes the kernel add sequentially: Note
    // [Fixed summation order] in codegen/llvm_reduction.cpp).
    struct Runs {
      std::vector<int64_t> sizes;
      bool strided = false;
      bool operator==(const Runs&) const = default;
    };
    auto runs = [&](const std::vector<std::vector<int64_t>>& strides) {
      Runs r;
      std::vector<int64_t> last(strides.size());
      for (size_t d = 0; d < rows.domain.size(); ++d) {
        if (!rows.reduced[d] || rows.domain[d] == 1) continue;
        bool merge = !r.sizes.empty();
        for (size_t p = 0; p < strides.size() && merge; ++p) merge = last[p] == strides[p][d] * rows.domain[d];
        if (merge)
          r.sizes.back() *= rows.domain[d];
        else
          r.sizes.push_back(rows.domain[d]);
        for (size_t p = 0; p < strides.size(); ++p) last[p] = strides[p][d];
      }
      for (int64_t stride : last) r.strided = r.strided || (!r.sizes.empty() && stride != 0 && stride != 1);
      return r;
    };
    // What the fused kernel walks along the row: operands from outside
    // read by row values and reductions, and row values stored (contiguous).
    std::vector<std::vector<int64_t>> all;
    std::vector<const Node*> sums;
    for (const Node* m : graph_.nodes()) {
      if (!inside.count(m) || m->op() == ir::Op::reshape) continue;
      const bool along = ir::isReduction(m->op()) || !rows.isOuterShape(m->output()->type().shape);
      if (!along) continue;
      for (Value* v : m->inputs())
        if (!isConstant(v->node()) && !(v->node() && inside.count(v->node()))) all.push_back(stridesOf(v));
      bool stored = m->output()->type().shape == rows.domain && graph_.isOutput(m->output());
      for (const ir::Use& use : m->output()->uses()) stored = stored || !inside.count(use.user);
      if (stored && !ir::isReduction(m->op())) all.push_back(stridesOf(m->output()));
      const ir::Op op = m->op();
      if ((op == ir::Op::sum || op == ir::Op::mean || op == ir::Op::var) && isFloatingPoint(m->input(0)->type().dtype))
        sums.push_back(m);
    }
    const Runs fused = runs(all);
    for (const Node* r : sums) {
      const Runs eager = runs({stridesOf(r->input(0))});
      if (eager.sizes != fused.sizes)
        return fmt::format(
            "the fused kernel would add the rows of {} in runs of {} elements, eager in runs of {} "
            "(another rounding)",
            describe(r), ir::shapeStr(fused.sizes), ir::shapeStr(eager.sizes));
      if (eager.strided != fused.strided)
        return fmt::format("the fused kernel would add the rows of {} {}, eager {} (another rounding)", describe(r),
                           fused.strided ? "in sequence" : "in vector lanes",
                           eager.strided ? "in sequence" : "in vector lanes");
    }
    return std::nullopt;
  }

 private:
  /// A library call or collective between the first and the last member
  /// of groups a and b together, in graph order (null: none).
  const Node* callBetween(const Group& a, const Group& b) const {
    int lo = std::numeric_limits<int>::max(), hi = -1;
    for (const Group* g : {&a, &b})
      for (const Node* m : g->members) {
        lo = std::min(lo, position_.at(m));
        hi = std::max(hi, position_.at(m));
      }
    return callBetween(lo, hi);
  }
  /// The same for group g and a node joining it.
  const Node* callBetween(const Group& g, const Node* n) const {
    int lo = position_.at(n), hi = lo;
    for (const Node* m : g.members) {
      lo = std::min(lo, position_.at(m));
      hi = std::max(hi, position_.at(m));
    }
    return callBetween(lo, hi);
  }
  const Node* callBetween(int lo, int hi) const {
    for (const Node* n : calls_)  // in graph order
      if (const int p = position_.at(n); p > lo && p < hi) return n;
    return nullptr;
  }

  /// Tries to add `n` to group g; says why not in a remark.
  bool tryAdd(int g, Node* n, std::string_view how) {
    Group& group = groups_[static_cast<size_t>(g)];
    const ir::RowDomain& rows = group.rows;
    if (ir::isBarrier(n->op())) return false;  // a kernel of its own (ir/Ops.def)
    if (n->output()->type().device != rows.device) return false;
    if (const Node* call = callBetween(group, n)) {
      refuse(n, group, fmt::format("{} lies between them", describe(call)), "refused-distance");
      return false;
    }
    if (ir::isReduction(n->op())) {
      if (!(ir::rowDomainOf(*n) == rows)) {
        refuse(n, group, "it reduces other rows", "refused-rows");
        return false;
      }
      if (isConstant(n->input(0)->node())) return false;
    } else if (n->op() == ir::Op::reshape) {
      // Only a reshape of a value per row to K or Q (the same values).
      if (!isOuterMember(group.inside, rows, n->input(0)) || !rows.isOuterShape(n->output()->type().shape))
        return false;
    } else if (isBroadcastCast(group, n)) {
    } else if (isElementwise(n)) {
      const ir::Shape& s = n->output()->type().shape;
      if (s != rows.domain && !rows.isOuterShape(s)) {
        refuse(n, group, fmt::format("it computes over {}", ir::shapeStr(s)), "refused-domain");
        return false;
      }
      if (s == rows.domain && columnRows(rows) && how == "fused producer" &&
          (n->output()->uses().size() > 1 || graph_.isOutput(n->output()))) {
        // Note [Column rows]: a kernel walks such rows with a stride, one
        // element per cache line; a producer needed elsewhere too would be
        // stored that way, where an elementwise kernel streams it.
        refuse(n, group,
               "it is needed outside the fusion and the rows are columns, walked with a stride: an elementwise "
               "kernel stores it faster",
               "refused-column-rows");
        return false;
      }
      if (s != rows.domain && ir::usesElementIndex(n->op())) {
        refuse(n, group, "it draws per element of a value per row", "refused-domain");
        return false;
      }
    } else {
      return false;
    }
    std::unordered_set<const Node*> with = group.inside;
    with.insert(n);
    if (auto problem = indexingProblem(with, rows)) {
      refuse(n, group, problem->first, problem->second);
      return false;
    }
    if (auto problem = rowOrderProblem(with, rows)) {
      refuse(n, group, *problem, "refused-row-order");
      return false;
    }
    if (wouldCycle(with)) {
      refuse(n, group, "a path leaves the fusion and comes back", "refused-cycle");
      return false;
    }
    add(g, n, how);
    return true;
  }

  /// Takes producers and consumers of the queued members, to a fixed point.
  void grow(int g) {
    while (!queue_.empty()) {
      Node* m = queue_.front();
      queue_.erase(queue_.begin());
      for (Value* v : m->inputs()) {
        Node* p = v->node();
        if (!p || groupOf_.count(p) || isConstant(p) || isView(p)) continue;
        if (isElementwise(p) || ir::isReduction(p->op())) tryAdd(g, p, "fused producer");
      }
      for (Value* out : m->outputs())
        for (const ir::Use& use : std::vector<ir::Use>(out->uses().begin(), out->uses().end())) {
          Node* c = use.user;
          if (groupOf_.count(c)) continue;
          if (isElementwise(c) || ir::isReduction(c->op()) || c->op() == ir::Op::reshape)
            tryAdd(g, c, "fused consumer");
        }
    }
  }

  Graph& graph_;
  PassContext& context_;
  std::unordered_map<const Node*, int> position_;  ///< in the graph as the pass found it
  std::vector<const Node*> calls_;                 ///< library calls and collectives, in order
  std::unordered_map<const Node*, int> groupOf_;
  std::vector<Group> groups_;
  std::vector<Node*> queue_;
  struct Refusal {
    const Node* node;
    int group;
    std::string why;
    const char* statistic;
  };
  std::vector<Refusal> refusals_;
};

/// Replaces `members` by one fusion node whose body also holds copies of
/// the view chains that feed them, each where first read; the node goes at
/// the end (the caller sorts). A group none of whose values is used is
/// erased instead (a fusion needs a result); returns nullptr then.
Node* outline(Graph& graph, const std::vector<Node*>& members) {
  ir::OutlineOptions options;
  options.copies = chainsInto(members);
  options.copiesAtFirstUse = true;
  return graph.outline(members, options);
}
}  // namespace

bool runFuseReductions(Graph& graph, PassContext& context) {
  bool any = false;
  for (const Node* n : graph.nodes()) any = any || ir::isReduction(n->op());
  if (!any) return false;
  Fuser fuser(graph, context);
  std::vector<Group>& groups = fuser.run();
  std::unordered_map<const Node*, int> key = positions(graph);
  bool changed = false;
  for (Group& group : groups) {
    if (!group.alive) continue;
    // Growth checked each step; a later member can take away a row value
    // stored earlier, so the order of the sums is checked once more.
    if (auto problem = fuser.rowOrderProblem(group.inside, group.rows)) {
      context.remark(fmt::format("dissolved the fusion of {}: {}", describe(group.members.front()), *problem));
      context.count("refused-row-order");
      continue;
    }
    int last = 0;
    for (const Node* m : group.members) last = std::max(last, key.at(m));
    const std::string first = describe(group.members.front());
    Node* fusion = outline(graph, group.members);
    changed = true;
    if (!fusion) {
      context.remark(fmt::format("removed the fusion of {}: no result is used", first));
      context.count("dead-ops-removed", static_cast<int64_t>(group.members.size()));
      continue;
    }
    key[fusion] = last;
    context.count("fusion-nodes");
    // The rules the verifier checks; a group breaking them is a bug here.
    if (auto error = ir::analyzeReductionGroup(ir::reductionGroupOf(*fusion), nullptr))
      KILN_ASSERT(false, "fuse-reductions built a fusion that breaks the rules: {}", error->message);
  }
  if (!changed) return false;
  // View ops and constants nobody reads any more (their copies are in bodies), last first.
  eraseUnused(graph, [](const Node* n) { return isView(n) || isConstant(n); });
  // Stable topological order: by key (a fusion where its last member was),
  // each node after its producers.
  reorderByKey(graph, key);
  return true;
}

}  // namespace kiln::passes
