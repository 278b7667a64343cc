// What the two fusion passes (fuse-elementwise, fuse-reductions) share
// besides Graph::outline: how remarks name a node, view chains (the view
// ops a kernel reads through, Note [Movement ops are read through] in
// passes/fuse_elementwise.cpp), the check that merging nodes into a group
// makes no cycle, and the stable reordering after outlining.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "ir/layout.h"

namespace kiln::passes {

using NodeSet = std::unordered_set<const ir::Node*>;

/// How remarks name a node: "relu: f32[4]@cpu".
std::string describe(const ir::Node* n);
bool isElementwise(const ir::Node* n);
/// Whether `n` is a view op (reshape, transpose, slice, expand); false for null.
bool isView(const ir::Node* n);
/// Whether `n` is a constant; false for null.
bool isConstant(const ir::Node* n);

/// The view ops from the root of v's chain (the first value not made by a
/// view op) down to v, in order; empty when v is not made by a view op.
std::vector<ir::Node*> chainOf(ir::Value* v);
/// The layout of the value at the end of `chain` (not empty) in the buffer
/// of its root, which is contiguous (a graph input — kiln::compile binds
/// contiguous arguments —, a fusion result or a constant); std::nullopt
/// when strides cannot read it (a reshape that merges transposed dims).
std::optional<ir::Layout> chainLayout(std::span<ir::Node* const> chain);
/// The view ops outside `members` that feed them: each member input's
/// chain, up to its root or a member, each op once, in the order first read.
std::vector<ir::Node*> chainsInto(std::span<ir::Node* const> members);

/// Whether a path leaves `inside` and comes back into it, once every other
/// group is one node: a path into one node of a group goes on from all of
/// them. `groupOf(n)` gives the nodes grouped with n (n itself, or nothing,
/// when it is alone). Merging such a set would make a fusion that depends on
/// itself; two groups, each without a cycle of its own, can feed each other.
bool wouldCycle(const NodeSet& inside, const std::function<std::span<ir::Node* const>(const ir::Node*)>& groupOf);

/// Each node of `graph` and its position.
std::unordered_map<const ir::Node*, int> positions(const ir::Graph& graph);
/// Erases, last first, the nodes `which` selects that nothing reads and the
/// graph does not return (view ops and constants whose copies went into
/// fusion bodies).
void eraseUnused(ir::Graph& graph, const std::function<bool(const ir::Node*)>& which);
/// Reorders `graph` by `key` (each node's; ties keep their order), moving a
/// node after its producers where the keys disagree: after outlining, each
/// fusion keyed where its last member stood keeps the order close to the old one.
void reorderByKey(ir::Graph& graph, const std::unordered_map<const ir::Node*, int>& key);

}  // namespace kiln::passes
