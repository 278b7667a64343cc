// The passes layer's contract (DESIGN.md §1, §5): the PassManager and the
// passes, one file each, named after their flags.
#pragma once

#include "passes/pass_manager.h"

namespace kiln::passes {

/// dce: removes nodes none of whose results is used.
bool runDce(ir::Graph& graph, PassContext& context);
/// fuse-elementwise: groups elementwise ops over one iteration domain into
/// fusion nodes (see passes/fuse_elementwise.cpp for the rules).
bool runFuseElementwise(ir::Graph& graph, PassContext& context);

}  // namespace kiln::passes
