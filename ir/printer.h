// The IR text printer (DESIGN.md §4; the grammar is in docs/ir.md):
//
//   graph @name(%x: f32[4,8]@cpu, %b: f32[8]@cpu) -> (f32[4,8]@cpu) {
//     %0 = add(%x, %b) : f32[4,8]@cpu
//     %1 = relu(%0) : f32[4,8]@cpu
//     return %1
//   }
//
// A fusion node prints its body as a region whose block arguments stand for
// the node's inputs:
//
//     %0 = fusion(%x, %b) : f32[4,8]@cpu {
//     ^(%2: f32[4,8]@cpu, %3: f32[8]@cpu):
//       %4 = add(%2, %3) : f32[4,8]@cpu
//       return %4
//     }
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

/// The text form of `graph`. Named values print as %name (made unique),
/// others are numbered in order of definition.
std::string printGraph(const Graph& graph);

}  // namespace kiln::ir
