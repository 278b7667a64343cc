// irdump --dot: a graph as Graphviz, with each fusion node drawn as a
// cluster holding its body, so that what fused is visible at a glance.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::tools {

/// The Graphviz `digraph` of `graph`.
std::string toDot(const ir::Graph& graph);

}  // namespace kiln::tools
