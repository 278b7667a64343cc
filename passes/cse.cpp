// cse: common-subexpression elimination by structural hashing (DESIGN.md §5).
//
// Two nodes are one when they have the same op, the same inputs (the same
// Values, in order), equal attributes and equal result types; the later one's
// uses go to the earlier one and the later one is erased. Nodes are visited in
// order, so once a node is merged its consumers read the kept value and can
// merge in the same run: a repeated chain goes at once.
//
// - Attributes compare exactly: floats by their bits, so constants 0.0 and
//   -0.0 differ and a NaN equals a NaN of the same bits (Attributes'
//   operator== would say 0.0 == -0.0 and NaN != NaN).
// - Commutative ops (ir::isCommutative: add, mul, eq, ne) have their
//   operands ordered by where they are defined before hashing, so add(a, b)
//   and add(b, a) are one. IEEE addition and multiplication give the same
//   bits either way except for which NaN comes out when both inputs are NaN,
//   which IEEE 754 leaves open (the tests count every NaN as equal to every
//   other, as Note [Eager equals compiled] does). maximum and minimum are NOT
//   commutative in kiln: their formula returns the second operand on a tie,
//   so maximum(0.0, -0.0) is -0.0 and maximum(-0.0, 0.0) is 0.0.
// - Random draws merge like any op: a draw is a function of its seed and
//   offset operands, so two with the same ones are the same draw (traced
//   draws each get inputs of their own, Note [Traced draws]). Fusion nodes
//   are left alone: neither merged nor looked into. Run cse before
//   fuse-elementwise, as the pipeline `canonicalize,cse,dce,fuse-elementwise`
//   does; fusion bodies hold their own copies of constants on purpose.
// - Barriers (opt_barrier) are never merged: what reads one stays apart from
//   what reads its operand, and from what reads another barrier of it.
// - Only the top-level graph is rewritten.
#include <algorithm>
#include <bit>
#include <functional>
#include <unordered_map>
#include <utility>
#include <variant>

#include "passes/passes.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Op;
using ir::Value;

/// Floats compare by their bits; every other kind of attribute by value.
bool sameAttr(const ir::AttrValue& a, const ir::AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(std::get<double>(b));
  return a == b;
}

bool sameAttrs(const ir::Attributes& a, const ir::Attributes& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || !sameAttr(i->second, j->second)) return false;
  return true;
}

void mix(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); }

size_t hashAttr(const ir::AttrValue& a) {
  size_t h = a.index();
  struct Visitor {
    size_t operator()(int64_t v) const { return std::hash<int64_t>{}(v); }
    size_t operator()(double v) const { return std::hash<uint64_t>{}(std::bit_cast<uint64_t>(v)); }
    size_t operator()(const std::string& v) const { return std::hash<std::string>{}(v); }
    size_t operator()(const std::vector<int64_t>& v) const {
      size_t h = v.size();
      for (int64_t x : v) mix(h, std::hash<int64_t>{}(x));
      return h;
    }
    size_t operator()(DType v) const { return static_cast<size_t>(v); }
  };
  mix(h, std::visit(Visitor{}, a));
  return h;
}

/// A node as cse sees it: its op, its inputs (ordered when the op commutes)
/// and a hash of everything compared.
struct Key {
  Node* node;
  std::vector<Value*> inputs;
  size_t hash;
};

class Cse {
 public:
  explicit Cse(const Graph& graph) {
    int pos = 0;
    for (Node* n : graph.nodes()) pos_[n] = pos++;
  }

  Key key(Node* n) const {
    Key k{n, std::vector<Value*>(n->inputs().begin(), n->inputs().end()), 0};
    if (ir::isCommutative(n->op()))
      std::sort(k.inputs.begin(), k.inputs.end(), [&](Value* a, Value* b) { return order(a) < order(b); });
    size_t h = static_cast<size_t>(n->op());
    for (Value* v : k.inputs) mix(h, std::hash<const Value*>{}(v));
    for (const auto& [name, value] : n->attrs()) {
      mix(h, std::hash<std::string>{}(name));
      mix(h, hashAttr(value));
    }
    k.hash = h;
    return k;
  }

  /// The earlier node equal to `k`'s, or nullptr after remembering it.
  Node* findOrInsert(Key k) {
    auto& bucket = buckets_[k.hash];
    for (const Key& other : bucket)
      if (equal(other, k)) return other.node;
    bucket.push_back(std::move(k));
    return nullptr;
  }

 private:
  /// A stable order of values: graph inputs first, then node results by
  /// their node's position.
  std::pair<int, int> order(const Value* v) const {
    if (!v->node()) return {-1, v->index()};
    return {pos_.at(v->node()), v->index()};
  }

  static bool equal(const Key& a, const Key& b) {
    const Node* x = a.node;
    const Node* y = b.node;
    if (x->op() != y->op() || a.inputs != b.inputs || x->numOutputs() != y->numOutputs()) return false;
    for (int i = 0; i < x->numOutputs(); ++i)
      if (x->output(i)->type() != y->output(i)->type()) return false;
    return sameAttrs(x->attrs(), y->attrs());
  }

  std::unordered_map<const Node*, int> pos_;
  std::unordered_map<size_t, std::vector<Key>> buckets_;
};
}  // namespace

bool runCse(Graph& graph, PassContext& context) {
  Cse cse(graph);
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->info().kind == ir::OpKind::control) continue;  // fusion: left to fuse-elementwise
    if (ir::isBarrier(n->op())) continue;                // opt_barrier: each one stays (ir/Ops.def)
    Node* kept = cse.findOrInsert(cse.key(n));
    if (!kept) continue;
    for (int i = 0; i < n->numOutputs(); ++i) graph.replaceAllUsesWith(n->output(i), kept->output(i));
    graph.erase(n);
    context.count("nodes-removed");
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes
