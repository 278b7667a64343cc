// The rules of a fusion of reductions (DESIGN.md §5, docs/fusion.md): what a
// fusion body that holds reductions may contain, checked by the verifier,
// relied on by codegen's lowering (codegen/lowering_reduction.cpp) and
// followed by the fuse-reductions pass, so that all three agree on one
// definition.
//
// Every reduction of such a group reduces the same dims of the same shape D
// (the rows). With K the reduction results' shape with keepdim (D with the
// reduced dims set to 1) and Q their shape without it (those dims removed),
// each value of the group is
//   - a row value: shape D, one per element of a row (the prologue, and
//     ops that combine a row with a reduction's result, x - amax(x));
//   - a value per row ("outer"): shape K or Q, one per row (reduction
//     results, and the epilogue: log(sum), var + eps);
//   - a view: a block argument, or a view op (reshape, transpose, slice,
//     expand) of a view or of a constant, read through strides by whoever
//     reads it;
//   - a constant (an immediate).
// Rules:
//   1. every reduction has the same D and reduced dims, and reduces a row
//      value or a view (not a constant);
//   2. an elementwise op computes over D, K or Q, or over a shape that
//      broadcasts to D from views, constants and such values only (a cast
//      of a weight: a row value, recomputed along each row);
//   3. a computed value per row is read per row: where the reader's shape
//      (D, K or Q) broadcasts it, it broadcasts along the reduced dims only,
//      so `x - amax(x, keepdim)` is fine and `x [4,4] - sum(x, dim 1) [4]`
//      (which broadcasts the sums along the rows) is not;
//   4. a movement op is a view (above) or a reshape of a value per row to
//      K or Q (the same elements in the same order);
//   5. results are computed row values (shape D) or values per row (K, Q);
//   6. an op that reads its element's index (dropout) is a row value.
// Other ops (library calls, fusions, cat) are not allowed. When every
// reduced dim has size 1 (K == D) shapes cannot tell a row value from a
// value per row: a value then is per row when it derives from a reduction
// and reads no row value (and the fuse-reductions pass never builds such a
// group).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The rows of a reduction: its input shape D and the dims it reduces.
struct RowDomain {
  Shape domain;               ///< D
  std::vector<bool> reduced;  ///< per dim of D
  Device device;
  Shape keepShape;  ///< K: D with the reduced dims set to 1
  Shape dropShape;  ///< Q: D without the reduced dims

  /// Every reduced dim has size 1: K == D.
  bool degenerate() const { return keepShape == domain; }
  /// K or Q.
  bool isOuterShape(const Shape& s) const { return s == keepShape || s == dropShape; }
  /// Whether a value per row of shape `s` (K or Q), broadcast to `context`
  /// (D, K or Q), lands each row's value on that row: it spreads along the
  /// reduced dims only.
  bool readsPerRow(const Shape& s, const Shape& context) const;
  /// "dims [1] of f32[8,4]@cpu"
  std::string str(DType dtype) const;
  friend bool operator==(const RowDomain&, const RowDomain&) = default;
};

/// The rows reduction node `n` reduces.
RowDomain rowDomainOf(const Node& n);

/// A group of nodes lowered as one reduction kernel: a fusion body's
/// inputs, nodes and results, or one reduction node with its inputs and
/// result. Uses of the inputs by other nodes are ignored.
struct ReductionGroup {
  std::vector<const Value*> inputs;
  std::vector<const Node*> nodes;
  std::vector<const Value*> outputs;
};
ReductionGroup reductionGroupOf(const Node& node);

/// What each value of a valid group is (see above).
struct ReductionGroupInfo {
  RowDomain rows;
  /// Computed values (node results but constants and views): true for a
  /// value per row, false for a row value.
  std::unordered_map<const Value*, bool> outer;
  /// Views: block arguments and view ops over views or constants.
  std::unordered_map<const Value*, bool> isView;
  /// Degenerate groups only: views some row value or reduction reads (they
  /// are read along the row by everyone).
  std::unordered_map<const Value*, bool> viewReadAlongRow;

  bool isOuter(const Value* v) const;
  /// Whether elementwise or reduction node `n` is evaluated along the row
  /// (a reduction, or a row value).
  bool readsAlongRow(const Node* n) const;
};

/// A broken rule: which node (index in `group.nodes`, or -1 for a result)
/// and why, in words that name the values.
struct ReductionGroupError {
  int node = -1;
  std::string message;
};

/// Classifies the values of `group`, which holds at least one reduction,
/// or says which rule it breaks.
std::optional<ReductionGroupError> analyzeReductionGroup(const ReductionGroup& group, ReductionGroupInfo* info);

}  // namespace kiln::ir
