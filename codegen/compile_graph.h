// From a fused graph to a runtime::Executable (DESIGN.md §2 steps 4-5).
//
// Every node of the graph must be a fusion node or a reduction (or a
// constant read only by fusion nodes): compileGraph() lowers each to its
// Kernels (one; one per input for a cat; a reduction is a kernel of its
// own, codegen/lowering_reduction.h), gets them compiled through the kernel
// cache and lays out buffer slots — the graph's inputs, then one slot per
// node result. A backend that cannot run a node says so up front
// (supports()), before anything is compiled.
#pragma once

#include <span>
#include <string>

#include "ir/graph.h"
#include "ir/layout.h"
#include "runtime/executable.h"

namespace kiln::codegen {

/// Whether the CPU backend can run `node` as a top-level node of a graph;
/// when not, `why` says why.
bool supports(const ir::Node& node, std::string* why = nullptr);

/// Compiles `graph` (after fusion) into an executable whose inputs are the
/// graph's inputs and whose outputs are the graph's outputs. Input i is laid
/// out with strides `inputStrides[i]` (in elements, from where the caller
/// binds it: Executable::run's offsets); all inputs are contiguous when
/// `inputStrides` is empty. Kernels read inputs through their strides (no
/// copies); results are contiguous. Throws kiln::Error naming the first
/// unsupported node.
runtime::Executable compileGraph(const ir::Graph& graph, std::span<const ir::Strides> inputStrides = {});

}  // namespace kiln::codegen
