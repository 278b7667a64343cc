// canonicalize: local rewrite rules, one a line in the table below, applied
// until none applies (DESIGN.md §5, STYLE.md: local rewrites are tables).
//
// Each rule looks at one node (the root, whose op the rule names) and its
// producers and returns the value that replaces the root's result, or nothing.
// The driver sweeps the top-level graph in order, tries the root's rules in
// table order, redirects the root's uses to the replacement, erases the root
// and the producers the rewrite left without uses, and sweeps again until a
// sweep changes nothing (at most kMaxSweeps). Fusion bodies are not
// rewritten: run canonicalize before fuse-elementwise.
//
// Note [Canonicalize is exact]
// A rule may only fire where it gives the same bits as the op it replaces
// for every input that is not NaN, ±0, ±inf and denormals included, and a
// NaN where the op gives a NaN. (Which NaN comes out of arithmetic is not
// fixed by IEEE 754, and differs between the CPU and CUDA already; the tests
// count every NaN as equal to every other, as Note [Eager equals compiled]
// does.) Signed zeros are where most algebra breaks: x + 0.0 is +0.0 for x =
// -0.0, so `x + 0.0 -> x` is not a rule, while x + (-0.0) and x - 0.0 are x
// for every x. A rule never changes the root's type: a rewrite whose
// replacement has another type (`x * 1` where the 1 broadcasts x to a larger
// shape) is not applied.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <string_view>
#include <vector>

#include "passes/passes.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {
using ir::Graph;
using ir::Node;
using ir::Op;
using ir::Value;

constexpr int kMaxSweeps = 16;

// --- Matchers: small enough that each rule fits on its line. ---

/// Input `i` of `n`.
Value* in(const Node* n, int i) { return n->input(i); }

/// Whether `v` is an f32 constant whose value, as kernels read it, has the
/// bits of `c` (so -0.0 is not 0.0).
bool isConst(const Value* v, float c) {
  const Node* d = v->node();
  if (!d || d->op() != Op::constant || v->type().dtype != DType::f32) return false;
  const auto value = static_cast<float>(std::get<double>(ir::constantValue(d->attrs(), DType::f32)));
  return std::bit_cast<uint32_t>(value) == std::bit_cast<uint32_t>(c);
}

/// The node defining `v` when its op is `op`.
Node* def(const Value* v, Op op) { return v->node() && v->node()->op() == op ? v->node() : nullptr; }

/// `v` when it has the type of `n`'s result (a rewrite never changes types).
Value* keep(const Node* n, Value* v) { return v->type() == n->output()->type() ? v : nullptr; }

/// A new node `op(inputs)` before `n`, when its type is `n`'s.
Value* make(Graph& g, Node* n, Op op, std::vector<Value*> inputs, ir::Attributes attrs = {}) {
  std::vector<ir::TensorType> types;
  for (Value* v : inputs) types.push_back(v->type());
  if (ir::inferType(op, types, attrs) != n->output()->type()) return nullptr;
  return g.create(op, inputs, std::move(attrs), n)->output();
}

const std::vector<int64_t>& perm(const Node* n) { return ir::intListAttr(n->attrs(), "perm", "transpose"); }

bool isIdentity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

/// transpose(transpose(x, p), q): result dim i is x's dim p[q[i]].
Value* composeTransposes(Graph& g, Node* outer) {
  Node* inner = def(in(outer, 0), Op::transpose);
  if (!inner) return nullptr;
  const auto &p = perm(inner), &q = perm(outer);
  std::vector<int64_t> r(q.size());
  for (size_t i = 0; i < q.size(); ++i) r[i] = p[q[i]];
  if (isIdentity(r)) return keep(outer, in(inner, 0));
  return make(g, outer, Op::transpose, {in(inner, 0)}, {{"perm", r}});
}

/// reshape(reshape(x, s1), s2): x in shape s2.
Value* composeReshapes(Graph& g, Node* outer) {
  Node* inner = def(in(outer, 0), Op::reshape);
  if (!inner) return nullptr;
  if (Value* x = keep(outer, in(inner, 0))) return x;
  return make(g, outer, Op::reshape, {in(inner, 0)}, outer->attrs());
}

/// A constant fill moved (reshaped, transposed) is the same fill in the new type.
Value* moveConstant(Graph& g, Node* n) {
  Node* c = def(in(n, 0), Op::constant);
  if (!c) return nullptr;
  return g.appendRaw(Op::constant, {}, {n->output()->type()}, c->attrs(), n)->output();
}

/// The rewrite of one rule: the value replacing `n`'s result, or nullptr.
/// It creates nodes (before `n`) only when it applies.
using Rewrite = Value* (*)(Graph& g, Node* n);

struct Rule {
  Op op;                  ///< the root's op
  std::string_view id;    ///< statistic name
  std::string_view text;  ///< the rule, for remarks and docs
  Rewrite rewrite;
};

// clang-format off
constexpr Rule kRules[] = {
  // x * 1 -> x: exact for every x.
  {Op::mul, "mul-one", "x * 1 -> x", [](Graph&, Node* n) { return isConst(in(n, 1), 1.0f) ? keep(n, in(n, 0)) : nullptr; }},
  // 1 * x -> x: exact for every x.
  {Op::mul, "one-mul", "1 * x -> x", [](Graph&, Node* n) { return isConst(in(n, 0), 1.0f) ? keep(n, in(n, 1)) : nullptr; }},
  // x * -1 -> neg(x): exact for every non-NaN x (±0 and ±inf included).
  {Op::mul, "mul-minus-one", "x * -1 -> neg(x)", [](Graph& g, Node* n) { return isConst(in(n, 1), -1.0f) ? make(g, n, Op::neg, {in(n, 0)}) : nullptr; }},
  // -1 * x -> neg(x): as above.
  {Op::mul, "minus-one-mul", "-1 * x -> neg(x)", [](Graph& g, Node* n) { return isConst(in(n, 0), -1.0f) ? make(g, n, Op::neg, {in(n, 1)}) : nullptr; }},
  // x / 1 -> x: exact for every x.
  {Op::div, "div-one", "x / 1 -> x", [](Graph&, Node* n) { return isConst(in(n, 1), 1.0f) ? keep(n, in(n, 0)) : nullptr; }},
  // x / -1 -> neg(x): exact for every non-NaN x.
  {Op::div, "div-minus-one", "x / -1 -> neg(x)", [](Graph& g, Node* n) { return isConst(in(n, 1), -1.0f) ? make(g, n, Op::neg, {in(n, 0)}) : nullptr; }},
  // x + (-0.0) -> x: exact for every x, -0.0 + -0.0 = -0.0. NOT x + 0.0 -> x: -0.0 + 0.0 is +0.0.
  {Op::add, "add-minus-zero", "x + -0.0 -> x", [](Graph&, Node* n) { return isConst(in(n, 1), -0.0f) ? keep(n, in(n, 0)) : nullptr; }},
  // (-0.0) + x -> x: as above; NOT 0.0 + x -> x.
  {Op::add, "minus-zero-add", "-0.0 + x -> x", [](Graph&, Node* n) { return isConst(in(n, 0), -0.0f) ? keep(n, in(n, 1)) : nullptr; }},
  // x + neg(y) -> x - y: IEEE defines x - y as x + (-y).
  {Op::add, "add-neg", "x + neg(y) -> x - y", [](Graph& g, Node* n) { Node* y = def(in(n, 1), Op::neg); return y ? make(g, n, Op::sub, {in(n, 0), in(y, 0)}) : nullptr; }},
  // neg(x) + y -> y - x: exact for every non-NaN x, y (addition commutes).
  {Op::add, "neg-add", "neg(x) + y -> y - x", [](Graph& g, Node* n) { Node* x = def(in(n, 0), Op::neg); return x ? make(g, n, Op::sub, {in(n, 1), in(x, 0)}) : nullptr; }},
  // x - 0.0 -> x: x - (+0.0) = x + (-0.0) = x for every x. NOT x - (-0.0) -> x: that is x + 0.0.
  {Op::sub, "sub-zero", "x - 0.0 -> x", [](Graph&, Node* n) { return isConst(in(n, 1), 0.0f) ? keep(n, in(n, 0)) : nullptr; }},
  // -0.0 - x -> neg(x): -0.0 + (-x) = -x for every non-NaN x. NOT 0.0 - x -> neg(x): 0.0 - 0.0 is +0.0.
  {Op::sub, "minus-zero-sub", "-0.0 - x -> neg(x)", [](Graph& g, Node* n) { return isConst(in(n, 0), -0.0f) ? make(g, n, Op::neg, {in(n, 1)}) : nullptr; }},
  // x - neg(y) -> x + y: x + (-(-y)), exact for every non-NaN x, y.
  {Op::sub, "sub-neg", "x - neg(y) -> x + y", [](Graph& g, Node* n) { Node* y = def(in(n, 1), Op::neg); return y ? make(g, n, Op::add, {in(n, 0), in(y, 0)}) : nullptr; }},
  // neg(neg(x)) -> x: neg flips the sign bit, twice is exact for every x, NaN included.
  {Op::neg, "neg-neg", "neg(neg(x)) -> x", [](Graph&, Node* n) { Node* x = def(in(n, 0), Op::neg); return x ? keep(n, in(x, 0)) : nullptr; }},
  // relu(relu(x)) -> relu(x): relu's result is ±0.0, > 0 or NaN, which relu returns as they are.
  {Op::relu, "relu-relu", "relu(relu(x)) -> relu(x)", [](Graph&, Node* n) { return def(in(n, 0), Op::relu) ? keep(n, in(n, 0)) : nullptr; }},
  // maximum(x, x) -> x: the formula selects between x and x; exact for every x, NaN included.
  {Op::maximum, "maximum-same", "maximum(x, x) -> x", [](Graph&, Node* n) { return in(n, 0) == in(n, 1) ? keep(n, in(n, 0)) : nullptr; }},
  // minimum(x, x) -> x: as above.
  {Op::minimum, "minimum-same", "minimum(x, x) -> x", [](Graph&, Node* n) { return in(n, 0) == in(n, 1) ? keep(n, in(n, 0)) : nullptr; }},
  // transpose(x, identity) -> x: moves nothing (a same-type transpose with another perm does move).
  {Op::transpose, "transpose-identity", "transpose(x, identity) -> x", [](Graph&, Node* n) { return isIdentity(perm(n)) ? keep(n, in(n, 0)) : nullptr; }},
  // transpose(transpose(x, p), q) -> transpose(x, r), r[i] = p[q[i]]; -> x when r is the identity.
  {Op::transpose, "transpose-transpose", "transpose(transpose(x, p), q) -> transpose(x, p∘q)", composeTransposes},
  // transpose(constant) -> constant: a fill is the same fill in any order.
  {Op::transpose, "transpose-constant", "transpose(constant c) -> constant c", moveConstant},
  // reshape(x, shape of x) -> x: the same elements in the same shape.
  {Op::reshape, "reshape-same", "reshape(x, shape of x) -> x", [](Graph&, Node* n) { return keep(n, in(n, 0)); }},
  // reshape(reshape(x, s1), s2) -> reshape(x, s2): row-major order is kept by both; -> x when s2 is x's shape.
  {Op::reshape, "reshape-reshape", "reshape(reshape(x, s1), s2) -> reshape(x, s2)", composeReshapes},
  // reshape(constant) -> constant: a fill is the same fill in any shape.
  {Op::reshape, "reshape-constant", "reshape(constant c) -> constant c", moveConstant},
  // slice(x) -> x when it takes all of x: a result of x's type starts at 0 with step 1 (or has one element or none).
  {Op::slice, "slice-all", "slice(x) of all of x -> x", [](Graph&, Node* n) { return keep(n, in(n, 0)); }},
  // slice(constant) -> constant: any part of a fill is the same fill.
  {Op::slice, "slice-constant", "slice(constant c) -> constant c", moveConstant},
  // expand(x, shape of x) -> x: repeats nothing.
  {Op::expand, "expand-same", "expand(x, shape of x) -> x", [](Graph&, Node* n) { return keep(n, in(n, 0)); }},
  // expand(constant) -> constant: a fill broadcast is the same fill.
  {Op::expand, "expand-constant", "expand(constant c) -> constant c", moveConstant},
};
// clang-format on

/// Erases `n` when none of its results is used, then its producers likewise
/// (every op is pure: a random draw is a function of its seed and offset).
/// Only producers of a rewritten root get here, and they precede it.
void eraseIfDead(Graph& g, Node* n) {
  for (Value* out : n->outputs())
    if (out->hasUses() || g.isOutput(out)) return;
  std::vector<Node*> producers;
  for (Value* v : n->inputs())
    if (v->node() && std::find(producers.begin(), producers.end(), v->node()) == producers.end())
      producers.push_back(v->node());
  g.erase(n);
  for (Node* p : producers) eraseIfDead(g, p);
}

/// Tries `n`'s rules in table order; applies the first that fires.
bool rewriteOne(Graph& g, Node* n, PassContext& context) {
  for (const Rule& rule : kRules) {
    if (rule.op != n->op()) continue;
    Value* replacement = rule.rewrite(g, n);
    if (!replacement) continue;
    KILN_ASSERT(replacement->type() == n->output()->type(), "canonicalize: {} changed {} to {}", rule.text,
                n->output()->type().str(), replacement->type().str());
    context.remark(fmt::format("{} on {}: {}", rule.text, ir::opName(n->op()), n->output()->type().str()));
    context.count("rewrites");
    context.count(std::string(rule.id));
    std::vector<Node*> producers;
    for (Value* v : n->inputs())
      if (v->node() && std::find(producers.begin(), producers.end(), v->node()) == producers.end())
        producers.push_back(v->node());
    g.replaceAllUsesWith(n->output(), replacement);
    g.erase(n);
    for (Node* p : producers) eraseIfDead(g, p);
    return true;
  }
  return false;
}
}  // namespace

bool runCanonicalize(Graph& graph, PassContext& context) {
  bool changed = false;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool swept = false;
    // Erasures only reach a root's producers, which precede it: the nodes
    // still to visit in `nodes` stay valid.
    for (Node* n : graph.nodes())
      if (n->numOutputs() == 1) swept = rewriteOne(graph, n, context) || swept;
    changed = changed || swept;
    if (!swept) return changed;
  }
  context.remark(fmt::format("stopped after {} sweeps that all changed the graph", kMaxSweeps));
  return changed;
}

}  // namespace kiln::passes
