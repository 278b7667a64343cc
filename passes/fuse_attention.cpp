// fuse-attention: finds softmax(q·kᵀ·scale + mask)·v, with or without
// dropout on the weights, written as separate ops, and replaces it by one
// `attention` node (runtime/attention.h: no [Lq, Lk] matrix in memory), as
// torch.compile's attention patterns do.
//
// The pattern, from the second matmul up (each value read by the pattern
// only, and not a graph output, so that nothing else needs the scores or
// the weights — a traced backward that saved the weights keeps them):
//
//   matmul(w, v)
//   w  = div(e, sum(e)) or dropout(div(e, sum(e)), seed, offset) {p}
//   e  = exp(sub(x, amax(x)))            amax and sum over the last dim, keepdim
//   x  = y, add(y, mask) or add(mask, y) (a mask of y's dtype that does not
//        broadcast y to a larger shape), or where(mask, y, -inf) (a bool mask)
//   y  = s, mul(s, c) or mul(c, s)       c a 0-d constant: the scale
//   s  = matmul(q, kᵀ)                   kᵀ a transpose of the last two dims
//                                        of k, or any [..., E, Lk] value
//
// with q, kᵀ and v of one rank and equal batch dims, of a dtype and on a
// device that ir::fusedAttentionOn accepts. kiln::scaledDotProductAttention's
// unfused form (its causal option as a where over an iota comparison) is
// this pattern too.
//
// Not bit for bit: the fused op's sums run in another order (Note [Flash
// attention on the CPU]); its results are the unfused graph's to the
// tolerance of docs/ops.md ("attention"). Compiled programs of a model that
// calls scaledDotProductAttention equal its eager results bit for bit, since
// both run the fused op.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <vector>

#include "ir/attention.h"
#include "passes/passes.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {
using ir::Node;
using ir::Op;
using ir::Value;

/// Whether `v` is read `uses` times, only by `readers`, and is not a graph output.
bool readOnlyBy(const Value* v, std::initializer_list<const Node*> readers, size_t uses) {
  if (v->graph()->isOutput(v) || v->uses().size() != uses) return false;
  for (const ir::Use& u : v->uses())
    if (std::find(readers.begin(), readers.end(), u.user) == readers.end()) return false;
  return true;
}

/// The node defining `v` when its op is `op` and `v` is read once, by `reader`.
Node* only(const Value* v, Op op, const Node* reader) {
  Node* d = v->node();
  return d && d->op() == op && d->numOutputs() == 1 && readOnlyBy(v, {reader}, 1) ? d : nullptr;
}

/// Whether reduction `n` is over the last dim of its input, keeping it.
bool overLastDim(const Node* n) {
  const ir::TensorType& t = n->input(0)->type();
  const ir::ReductionShape rs = ir::reductionShape(n->op(), t, n->attrs());
  return rs.keepdim && rs.dims == std::vector<int>{t.rank() - 1};
}

/// The value of a 0-d float constant.
std::optional<double> scalarConstant(const Value* v) {
  const Node* d = v->node();
  if (!d || d->op() != Op::constant || v->type().rank() != 0 || !isFloatingPoint(v->type().dtype))
    return std::nullopt;
  return std::get<double>(ir::constantValue(d->attrs(), v->type().dtype));
}

struct Match {
  Value *q = nullptr, *kt = nullptr, *v = nullptr, *mask = nullptr, *seed = nullptr, *offset = nullptr;
  double scale = 1.0, p = 0.0;
  std::vector<Node*> dead;  ///< the pattern's nodes but the second matmul
};

/// y = matmul(q, kᵀ), mul(matmul(q, kᵀ), c) or mul(c, matmul(q, kᵀ)), read
/// only by `readers`, `uses` times: fills q, kᵀ and the scale.
bool matchScores(Value* y, std::initializer_list<const Node*> readers, size_t uses, Match& m) {
  Node* d = y->node();
  if (!d || !readOnlyBy(y, readers, uses)) return false;
  Node* qk = d;
  if (d->op() == Op::mul) {
    const int c = scalarConstant(d->input(1)) ? 1 : scalarConstant(d->input(0)) ? 0 : -1;
    if (c < 0) return false;
    Value* s = d->input(1 - c);
    if (s->type().shape != y->type().shape) return false;
    qk = only(s, Op::matmul, d);
    if (!qk) return false;
    m.scale = *scalarConstant(d->input(c));
    m.dead.push_back(d);
  } else if (d->op() != Op::matmul) {
    return false;
  }
  m.q = qk->input(0), m.kt = qk->input(1);
  m.dead.push_back(qk);
  return true;
}

/// Matches the pattern whose second matmul is `mm`.
std::optional<Match> match(Node* mm) {
  Match m;
  m.v = mm->input(1);
  Value* w = mm->input(0);
  Node* div = nullptr;
  if (Node* drop = only(w, Op::dropout, mm)) {
    m.p = ir::floatAttr(drop->attrs(), "p", "dropout");
    m.seed = drop->input(1), m.offset = drop->input(2);
    m.dead.push_back(drop);
    div = only(drop->input(0), Op::div, drop);
  } else {
    div = only(w, Op::div, mm);
  }
  if (!div) return std::nullopt;
  Node* sum = only(div->input(1), Op::sum, div);
  Node* exp = div->input(0)->node();
  if (!sum || !exp || exp->op() != Op::exp || sum->input(0) != exp->output() || !overLastDim(sum) ||
      !readOnlyBy(exp->output(), {div, sum}, 2))
    return std::nullopt;
  Node* sub = only(exp->input(0), Op::sub, exp);
  if (!sub) return std::nullopt;
  Value* x = sub->input(0);
  Node* amax = only(sub->input(1), Op::amax, sub);
  if (!amax || amax->input(0) != x || !overLastDim(amax)) return std::nullopt;
  m.dead.insert(m.dead.end(), {div, sum, exp, sub, amax});
  // x: the scores, or the scores and a mask.
  Node* d = x->node();
  if (!readOnlyBy(x, {sub, amax}, 2) || !d) return std::nullopt;
  if (d->op() == Op::where) {
    const std::optional<double> fill = scalarConstant(d->input(2));
    if (!fill || !(std::isinf(*fill) && *fill < 0) || d->input(0)->type().dtype != DType::boolean ||
        d->input(1)->type().shape != x->type().shape || !matchScores(d->input(1), {d}, 1, m))
      return std::nullopt;
    m.mask = d->input(0);
  } else if (d->op() == Op::add) {
    int scores = -1;
    for (int i : {0, 1}) {
      Match tried = m;
      if (d->input(i)->type().shape == x->type().shape && d->input(1 - i)->type().dtype == x->type().dtype &&
          matchScores(d->input(i), {d}, 1, tried)) {
        m = std::move(tried);
        scores = i;
        break;
      }
    }
    if (scores < 0) return std::nullopt;
    m.mask = d->input(1 - scores);
  } else if (!matchScores(x, {sub, amax}, 2, m)) {
    return std::nullopt;
  }
  if (m.mask) m.dead.push_back(d);
  // One rank, equal batch dims, a dtype and device the fused op takes.
  const ir::TensorType &q = m.q->type(), &kt = m.kt->type(), &v = m.v->type();
  if (q.rank() < 2 || kt.rank() != q.rank() || v.rank() != q.rank()) return std::nullopt;
  const ir::Shape batch(q.shape.begin(), q.shape.end() - 2);
  if (ir::Shape(kt.shape.begin(), kt.shape.end() - 2) != batch || ir::Shape(v.shape.begin(), v.shape.end() - 2) != batch)
    return std::nullopt;
  if (!ir::fusedAttentionOn(q.device, q.dtype)) return std::nullopt;
  return m;
}

/// Erases the nodes of `candidates` that nothing reads, and then the
/// producers that leaves unread (the views and constants the pattern read),
/// in whatever order they become unread.
void eraseUnread(ir::Graph& g, std::vector<Node*> candidates) {
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < candidates.size(); ++i) {
      Node* n = candidates[i];
      bool read = false;
      for (Value* out : n->outputs()) read = read || out->hasUses() || g.isOutput(out);
      if (read) continue;
      candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(i--));
      for (Value* in : n->inputs())
        if (in->node() && std::find(candidates.begin(), candidates.end(), in->node()) == candidates.end())
          candidates.push_back(in->node());
      g.erase(n);
      progress = true;
    }
  }
}

/// k from kᵀ: the transpose's input when kᵀ is one of the last two dims,
/// else a new transpose view before `before`.
Value* keysOf(ir::Graph& g, Value* kt, Node* before) {
  const int r = kt->type().rank();
  std::vector<int64_t> swap(static_cast<size_t>(r));
  for (int d = 0; d < r; ++d) swap[static_cast<size_t>(d)] = d;
  std::swap(swap[static_cast<size_t>(r - 2)], swap[static_cast<size_t>(r - 1)]);
  if (Node* t = kt->node(); t && t->op() == Op::transpose && ir::intListAttr(t->attrs(), "perm", "transpose") == swap)
    return t->input(0);
  return g.create(Op::transpose, std::vector<Value*>{kt}, {{"perm", swap}}, before)->output();
}
}  // namespace

bool runFuseAttention(ir::Graph& graph, PassContext& context) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->op() != Op::matmul) continue;
    std::optional<Match> m = match(n);
    if (!m) continue;
    std::vector<Value*> operands = {m->q, keysOf(graph, m->kt, n), m->v};
    if (m->mask) operands.push_back(m->mask);
    if (m->p > 0) operands.insert(operands.end(), {m->seed, m->offset});
    Node* fused = graph.create(Op::attention, operands,
                               {{"scale", m->scale}, {"causal", int64_t{0}}, {"p", m->p}}, n);
    graph.replaceAllUsesWith(n->output(), fused->output());
    m->dead.push_back(n);
    eraseUnread(graph, m->dead);
    context.remark(fmt::format("fused attention {} of q {}, k {}, v {}{}{}", fused->output()->type().str(),
                               m->q->type().str(), operands[1]->type().str(), m->v->type().str(),
                               m->mask ? ", mask " + m->mask->type().str() : "",
                               m->p > 0 ? fmt::format(", dropout p = {}", m->p) : ""));
    context.count("attentions-fused");
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes
