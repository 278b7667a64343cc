// The rules of a fusion of reductions (ir/reduction_fusion.h): rows of a
// reduction, and the classification of a group's values with the first
// broken rule.
#include "ir/reduction_fusion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unordered_set>

#include "ir/layout.h"
#include "runtime/error.h"

namespace kiln::ir {

namespace {
/// Positions of the kept dims in a shape of rank `rank` that is D, K or Q.
std::vector<int> keptPositions(const RowDomain& rows, size_t rank) {
  std::vector<int> kept;
  if (rank == rows.domain.size()) {
    for (size_t d = 0; d < rows.domain.size(); ++d)
      if (!rows.reduced[d]) kept.push_back(static_cast<int>(d));
  } else {
    for (size_t i = 0; i < rank; ++i) kept.push_back(static_cast<int>(i));
  }
  return kept;
}

std::string describe(const Node* n) { return fmt::format("{} ({})", opName(n->op()), n->output()->type().str()); }
}  // namespace

bool RowDomain::readsPerRow(const Shape& s, const Shape& context) const {
  if (s.size() > context.size()) return false;
  const std::vector<int> from = keptPositions(*this, s.size()), to = keptPositions(*this, context.size());
  if (from.size() != to.size()) return false;
  const size_t lead = context.size() - s.size();
  for (size_t k = 0; k < from.size(); ++k) {
    const size_t at = static_cast<size_t>(from[k]);
    // A kept dim of size 1 may land anywhere (it broadcasts); one of
    // another size must land on the same kept dim of the context.
    if (s[at] != 1 && at + lead != static_cast<size_t>(to[k])) return false;
  }
  return true;
}

std::string RowDomain::str(DType dtype) const {
  std::vector<int> dims;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) dims.push_back(static_cast<int>(d));
  return fmt::format("dims [{}] of {}", fmt::join(dims, ", "), TensorType{dtype, domain, device}.str());
}

RowDomain rowDomainOf(const Node& n) {
  KILN_ASSERT(isReduction(n.op()), "rowDomainOf {}", opName(n.op()));
  const TensorType& in = n.input(0)->type();
  const ReductionShape rs = reductionShape(n.op(), in, n.attrs());
  RowDomain r;
  r.domain = in.shape;
  r.device = in.device;
  r.reduced.assign(in.shape.size(), false);
  for (int d : rs.dims) r.reduced[static_cast<size_t>(d)] = true;
  r.keepShape = reducedShape(in.shape, rs.dims, true);
  r.dropShape = reducedShape(in.shape, rs.dims, false);
  return r;
}

ReductionGroup reductionGroupOf(const Node& node) {
  ReductionGroup g;
  if (node.op() == Op::fusion) {
    const Graph& body = *node.body();
    g.inputs.assign(body.inputs().begin(), body.inputs().end());
    for (const Node* n : body.nodes()) g.nodes.push_back(n);
    g.outputs.assign(body.outputs().begin(), body.outputs().end());
  } else {
    g.inputs.assign(node.inputs().begin(), node.inputs().end());
    g.nodes = {&node};
    g.outputs.assign(node.outputs().begin(), node.outputs().end());
  }
  return g;
}

bool ReductionGroupInfo::isOuter(const Value* v) const {
  auto it = outer.find(v);
  return it != outer.end() && it->second;
}

bool ReductionGroupInfo::readsAlongRow(const Node* n) const { return isReduction(n->op()) || !isOuter(n->output()); }

std::optional<ReductionGroupError> analyzeReductionGroup(const ReductionGroup& g, ReductionGroupInfo* out) {
  ReductionGroupInfo info;
  auto fail = [](int node, std::string message) { return ReductionGroupError{node, std::move(message)}; };
  const int count = static_cast<int>(g.nodes.size());
  int first = -1;
  for (int j = 0; j < count; ++j) {
    const Node* n = g.nodes[j];
    if (!isReduction(n->op())) continue;
    const RowDomain rows = rowDomainOf(*n);
    if (first < 0) {
      first = j;
      info.rows = rows;
    } else if (!(rows == info.rows)) {
      return fail(j, fmt::format("{} reduces {}, but {} reduces {}; the reductions of a fusion share their rows",
                                 opName(n->op()), rows.str(n->input(0)->type().dtype), opName(g.nodes[first]->op()),
                                 info.rows.str(g.nodes[first]->input(0)->type().dtype)));
    }
  }
  KILN_ASSERT(first >= 0, "analyzeReductionGroup of a group without reductions");
  const RowDomain& rows = info.rows;
  const bool degenerate = rows.degenerate();

  std::unordered_set<const Value*> constants, derived;
  for (const Value* v : g.inputs) info.isView[v] = true;
  auto isView = [&](const Value* v) { return info.isView.count(v) != 0; };
  auto isComputed = [&](const Value* v) { return info.outer.count(v) != 0; };
  for (int j = 0; j < count; ++j) {
    const Node* n = g.nodes[j];
    const OpKind kind = n->info().kind;
    if (n->op() == Op::constant) {
      constants.insert(n->output());
      continue;
    }
    if (kind == OpKind::movement && isViewOp(n->op())) {
      const Value* in = n->input(0);
      if (isView(in) || constants.count(in)) {
        info.isView[n->output()] = true;
        continue;
      }
      const Shape& s = n->output()->type().shape;
      if (n->op() == Op::reshape && isComputed(in) && info.outer.at(in) && rows.isOuterShape(s)) {
        info.outer[n->output()] = true;  // the same values per row, relabeled
        derived.insert(n->output());
        continue;
      }
      return fail(j, fmt::format("{} of a computed value; in a fusion of reductions a movement op views a block "
                                 "argument or reshapes a value per row to {} or {}",
                                 describe(n), shapeStr(rows.keepShape), shapeStr(rows.dropShape)));
    }
    if (isReduction(n->op())) {
      if (constants.count(n->input(0))) return fail(j, fmt::format("{} reduces a constant", describe(n)));
      info.outer[n->output()] = true;
      derived.insert(n->output());
      continue;
    }
    if (kind != OpKind::elementwise)
      return fail(j, fmt::format("{} cannot be in a fusion of reductions (only elementwise ops, reductions over "
                                 "one set of rows, views and constants)",
                                 describe(n)));
    const Shape& s = n->output()->type().shape;
    if (s != rows.domain && !rows.isOuterShape(s)) {
      // A value of a smaller shape that broadcasts along the rows (a cast
      // of a weight): evaluated with the row, from views and constants.
      bool ok = broadcastShapes(s, rows.domain) == rows.domain;
      for (const Value* v : n->inputs())
        ok = ok && (isView(v) || constants.count(v) || (isComputed(v) && !info.outer.at(v)));
      if (!ok)
        return fail(j, fmt::format("{} computes over {}, which is neither the rows' shape {} nor a reduction "
                                   "result's {} or {} (nor a shape broadcast along the rows, from block arguments "
                                   "and constants)",
                                   describe(n), shapeStr(s), shapeStr(rows.domain), shapeStr(rows.keepShape),
                                   shapeStr(rows.dropShape)));
      info.outer[n->output()] = false;
      continue;
    }
    bool d = false;
    for (const Value* v : n->inputs()) d = d || derived.count(v) != 0;
    if (d) derived.insert(n->output());
    // K == D: a value of that shape is per row when it derives from a
    // reduction (refined below); otherwise the shape says it.
    info.outer[n->output()] = rows.isOuterShape(s) && (s != rows.domain || d);
  }

  // An op reading a row value is a row value; with K == D, so is one that
  // reads a view some row value or reduction reads (a view has one class).
  for (bool changed = true; changed;) {
    changed = false;
    if (degenerate)
      for (const Node* n : g.nodes)
        if ((isReduction(n->op()) || (isComputed(n->output()) && !info.outer.at(n->output()))))
          for (const Value* v : n->inputs())
            if (isView(v) && !info.viewReadAlongRow[v]) info.viewReadAlongRow[v] = changed = true;
    for (const Node* n : g.nodes) {
      if (isReduction(n->op()) || !isComputed(n->output()) || !info.outer.at(n->output())) continue;
      for (const Value* v : n->inputs()) {
        const bool row = (isComputed(v) && !info.outer.at(v)) || (degenerate && isView(v) && info.viewReadAlongRow[v]);
        if (row) {
          info.outer[n->output()] = false;
          changed = true;
          break;
        }
      }
    }
  }

  for (int j = 0; j < count; ++j) {
    const Node* n = g.nodes[j];
    if (!isComputed(n->output()) || n->info().kind == OpKind::movement) continue;
    const bool along = info.readsAlongRow(n);
    if (isReduction(n->op())) {
      const Value* v = n->input(0);
      if (isComputed(v) && info.outer.at(v))
        return fail(j, fmt::format("{} reduces a value per row, not a row", describe(n)));
      continue;
    }
    if (!along && usesElementIndex(n->op()))
      return fail(j, fmt::format("{} draws per element of a value per row; in a fusion of reductions it takes row "
                                 "values only",
                                 describe(n)));
    const Shape& context = along ? rows.domain : n->output()->type().shape;
    for (int k = 0; k < n->numInputs(); ++k) {
      const Value* v = n->input(k);
      if (!isComputed(v) || !info.outer.at(v)) continue;
      if (!rows.readsPerRow(v->type().shape, context))
        return fail(j, fmt::format("{} reads operand {} ({}), a value per row, broadcast along {} otherwise than "
                                   "along the reduced dims ({})",
                                   describe(n), k, v->type().str(), shapeStr(context), rows.str(v->type().dtype)));
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Value* v = g.outputs[i];
    if (!isComputed(v))
      return fail(-1, fmt::format("result {} ({}) is not computed by the fusion (a block argument, view or constant)",
                                  i, v->type().str()));
    const Shape& s = v->type().shape;
    if (!(info.outer.at(v) ? rows.isOuterShape(s) : s == rows.domain))
      return fail(
          -1, fmt::format("result {} ({}) is neither a row value of {} nor a value per row of {} or {}", i,
                          v->type().str(), shapeStr(rows.domain), shapeStr(rows.keepShape), shapeStr(rows.dropShape)));
  }
  if (out) *out = std::move(info);
  return std::nullopt;
}

}  // namespace kiln::ir
