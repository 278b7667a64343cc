// From a fused graph to a runtime::Executable (DESIGN.md §2 steps 4-5).
//
// Every node of the graph must be a fusion node, a reduction or a library
// call (or a constant read only by fusion nodes, or a view op read only by
// library calls): compileGraph() lowers each fusion and reduction to its
// Kernels (one; one per input for a cat; a reduction is a kernel of its
// own, codegen/lowering_reduction.h) and gets them compiled through the
// kernel cache, lowers each library call to a runtime::LibraryStep
// (codegen/lowering_library.h), and lays out buffer slots — the graph's
// inputs, then one slot per node result — which plan-memory then packs into
// shared buffers (codegen/plan_memory.h). Everything device-specific — how
// a kernel is compiled and loaded, its launch shape, the library functions —
// comes from the target device's codegen::Target. A target that cannot run
// a node says so up front (supports()), before anything is compiled.
//
// Note [Library calls read views]: a library call takes each operand with
// its strides (a transposed weight goes to BLAS with the transposed flag,
// an expanded batch dim is a stride of 0), so a view op read only by
// library calls needs no copy. fuse-elementwise leaves such view chains in
// place (when strides can express them), and here each is an alias: its
// value shares its input's slot, with the layout ir::movedLayout gives.
#pragma once

#include <span>
#include <string>

#include "ir/graph.h"
#include "ir/layout.h"
#include "runtime/device.h"
#include "runtime/executable.h"

namespace kiln::codegen {

/// Whether `node` can run as a top-level node of a graph compiled for
/// `device` (its inputs on `device`, a node kind compileGraph lowers, and
/// one the device's Target runs); when not, `why` says why.
bool supports(const ir::Node& node, Device device, std::string* why = nullptr);

/// A graph input whose buffer the caller gives up to a graph output
/// (Note [Donated buffers] in compile_graph.cpp): the output may be written
/// into it, in place, when that is safe; Executable::run then returns the
/// input's buffer for that output.
struct Donation {
  int input = -1;   ///< graph input index
  int output = -1;  ///< graph output index
};

/// Compiles `graph` (after fusion) for `device` into an executable whose
/// inputs are the graph's inputs and whose outputs are the graph's outputs:
/// its kernels are compiled by the device's Target (codegen/target.h) and
/// loaded on the device, its steps launch there. Input i is laid
/// out with strides `inputStrides[i]` (in elements, from where the caller
/// binds it: Executable::run's offsets); all inputs are contiguous when
/// `inputStrides` is empty. Kernels read inputs through their strides (no
/// copies); results are contiguous, each in a buffer of its own unless a
/// donation lets it overwrite its input. Throws kiln::Error naming the first
/// unsupported node.
/// `outputStrides`, when not empty, gives the strides each graph output is
/// written with (an output made by an elementwise fusion; contiguous
/// strides for the others), into a buffer the caller binds (Executable::run's
/// `outputs`): a copy into a view is one kernel (copy_).
runtime::Executable compileGraph(const ir::Graph& graph, Device device, std::span<const ir::Strides> inputStrides = {},
                                 std::span<const Donation> donations = {},
                                 std::span<const ir::Strides> outputStrides = {});

/// The device a graph runs on: that of its first input, else of its first
/// output, else the CPU (a graph of constants). compileGraph() checks that
/// every node's inputs are there.
Device graphDevice(const ir::Graph& graph);

}  // namespace kiln::codegen
