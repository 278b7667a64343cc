// The IR verifier (DESIGN.md §4; docs/ir.md lists its checks): whether a
// graph is well formed whatever built it (the parser, tracing, a pass). Run it
// after parsing and after every pass in tests. It checks SSA dominance (an
// operand is a graph input or defined by an earlier node of the same graph),
// use lists, operand and result counts against the op registry, result types
// against the registry's rules (dtypes, shapes, devices), constants, fusion
// bodies (interface, contents, recursively) and the graph's outputs.
//
// An error throws kiln::Error naming the graph, the node (its index and the
// line the printer writes for it) and what is wrong; on parsed input, with
// the table ir::parseSource returns, it starts with the node's file:line:col:
//
//   t.kir:3:3: graph @g, node 1: add: shapes do not broadcast, got f32[2,3]@cpu and f32[4]@cpu
//     %1 = add(%0, %b) : f32[2,3]@cpu
#pragma once

#include "ir/graph.h"
#include "ir/parser.h"

namespace kiln::ir {

/// Throws kiln::Error on the first problem found in `graph` (fusion bodies
/// included). `locations` (from parseSource, for the graph as parsed) adds
/// source locations to the messages.
void verify(const Graph& graph, const SourceLocations* locations = nullptr);

}  // namespace kiln::ir
