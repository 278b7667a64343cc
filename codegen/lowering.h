// Lowering of a fusion node to a target-independent Kernel (DESIGN.md §6).
//
// The iteration domain is the node's result shape. Each operand gets
// strides over that domain (0 along broadcast dimensions); size-1 dimensions
// are dropped and neighbouring dimensions merged wherever every operand
// walks them as one (like PyTorch's TensorIterator coalescing), so a
// contiguous elementwise chain is a rank-1 loop and a row-broadcast bias add
// a rank-2 one. What is left — rank, dtypes, each operand's innermost stride
// class and the body — is the kernel; sizes and strides are its arguments.
#pragma once

#include <span>

#include "codegen/kernel.h"
#include "ir/graph.h"

namespace kiln::codegen {

struct LoweredKernel {
  Kernel kernel;
  LaunchArgs launch;
};

/// Lowers `fusion` over contiguous operands of its input and result types.
LoweredKernel lowerFusion(const ir::Node& fusion);

/// Coalesced domain of `domain` for operands with the given strides (one
/// vector per operand, aligned with `domain`). Exposed for tests.
void coalesce(std::vector<int64_t>& domain, std::vector<std::vector<int64_t>>& strides);

}  // namespace kiln::codegen
