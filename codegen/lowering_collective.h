// Lowering of a collective node (ir::OpKind::collective: all_reduce) to
// the start and wait steps of the executable, and their schedule (Note
// [Scheduling collectives] in codegen/lowering_collective.cpp).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "runtime/executable.h"

namespace kiln::codegen {

/// The start step of collective `node` over slot `slot` (its result, which
/// holds its operand's elements when the start runs), numbered `ticket`;
/// its wait is the same step with phase `wait`. kiln::Error when the node's
/// process group is not one of this process (runtime::dist::groupById) or
/// its reduction is unknown.
runtime::CollectiveStep lowerCollective(const ir::Node& node, int slot, int ticket);

/// Moves each collective start of `exe` up to right after the last step
/// before it that names its slot (its operand's producer), no earlier than
/// the start before it, and inserts its wait right before the first later
/// step that names its slot (else at the end), and before the first step
/// that writes into a donated input slot (`donated`: the last step naming
/// one of them is its in-place update).
void scheduleCollectives(runtime::Executable& exe, const std::vector<int>& donated);

}  // namespace kiln::codegen
