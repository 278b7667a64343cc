// Lowering of reductions to reduction Kernels (codegen/kernel.h,
// "Reductions"; DESIGN.md §6).
//
// A reduction node is lowered as a group of one: a kernel whose domain is
// the reduction's input shape with the reduced dims moved innermost (the
// outer dims and the reduced dims are each coalesced as codegen::coalesce
// does, never with each other), reading its input with the input's
// strides, so reducing dim 0 of an [R,C] matrix walks each column with
// stride C. The same lowering takes a fusion node whose body holds
// reductions, as fuse-reductions builds them under the rules of
// ir/reduction_fusion.h (which tells each value's kind): elementwise ops
// before them become the prologue, ops on their results the epilogue, and
// ops that combine a row with a reduction's result (x - amax(x)) a further
// pass over the row. Each view of an input is read through its strides: as
// a row parameter where row values or reductions read it, as an outer one
// (once per row) where values per row do, so one input can be both.
//
// The phases are the kernel builder's (codegen/kernel_builder.h), with its
// row split. How each reduction op becomes instructions
// (KernelBuilder::reduction; docs/ops.md, "Reductions"):
// sum accumulates floats in f64 and integers in i64, then casts to the
// result dtype; mean is that f64 sum divided by the row's extent; var is two
// passes in f64 (the mean, then the sum of squared deviations, divided by
// max(0, n - correction)); amax and amin are reduce.max/min in the input
// dtype; argmax is reduce.argmax.
#pragma once

#include <span>
#include <vector>

#include "codegen/lowering.h"
#include "ir/graph.h"
#include "ir/layout.h"

namespace kiln::codegen {

/// Whether `node` lowers to a reduction kernel: a reduction node, or a
/// fusion node whose body holds a reduction.
bool isReductionNode(const ir::Node& node);

/// The one kernel of reduction node (or fusion of reductions) `node`, whose
/// inputs are laid out as `inputs` (contiguous when empty). Its bindings are
/// the node's inputs then results, in order.
LoweredKernel lowerReduction(const ir::Node& node, std::span<const ir::Layout> inputs = {});

/// The kernels of any node codegen runs, in launch order: lowerReduction for
/// a reduction node (or a fusion of reductions), else lowerFusionKernels
/// (whose results alone may be written through given `outputs` layouts).
std::vector<LoweredKernel> lowerKernels(const ir::Node& node, std::span<const ir::Layout> inputs = {},
                                        std::span<const ir::Layout> outputs = {});

/// Output rows per thread-pool chunk for a reduction kernel launched with
/// `launch` (codegen/compile_graph.cpp): whole rows, enough of them for
/// about 32768 elements of work, and a multiple of 64 so that two threads
/// never write one cache line of outer results (64 one-byte elements).
int64_t reductionGrain(const Kernel& kernel, const LaunchArgs& launch);

}  // namespace kiln::codegen
