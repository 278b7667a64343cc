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
/// fuse-reductions: groups row reductions with their elementwise producers
/// and consumers, and reductions over the same rows, into fusion nodes (see
/// passes/fuse_reductions.cpp); run it before fuse-elementwise.
bool runFuseReductions(ir::Graph& graph, PassContext& context);
/// fuse-attention: replaces softmax(q·kᵀ·scale + mask)·v written as
/// separate ops (dropout on the weights included) by one `attention` node
/// where it runs fused (see passes/fuse_attention.cpp); run it before the
/// fusion passes.
bool runFuseAttention(ir::Graph& graph, PassContext& context);
/// fold-batchnorm: folds a per-channel affine after a conv2d (batch norm in
/// eval mode) into its weight and a bias add (see passes/fold_batchnorm.cpp;
/// to a tolerance, not in the default pipeline).
bool runFoldBatchNorm(ir::Graph& graph, PassContext& context);
/// cse: merges nodes that compute the same thing (same op, inputs,
/// attributes and result types), keeping the first.
bool runCse(ir::Graph& graph, PassContext& context);
/// fold-constants: replaces an elementwise node whose inputs are all
/// constants by the constant it computes (the kernels' scalar formulas).
bool runFoldConstants(ir::Graph& graph, PassContext& context);
/// canonicalize: applies the local rewrite rules of passes/canonicalize.cpp
/// until none applies.
bool runCanonicalize(ir::Graph& graph, PassContext& context);

}  // namespace kiln::passes
