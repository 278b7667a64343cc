// Lowering of a fusion node to target-independent Kernels (DESIGN.md §6).
//
// The iteration domain is the node's result shape. Each fusion input has a
// layout (ir/layout.h: strides and an offset in its buffer; contiguous
// unless the caller says otherwise, as eager does for views), and movement
// ops inside the body (reshape, transpose, slice, expand) remap it: a
// transpose feeding an add is a load with the transposed strides, a slice a
// load from an offset. Every distinct (input, strides, offset) an
// elementwise op reads is one kernel parameter, so `x + x.t()` reads one
// buffer through two parameters. Each parameter's strides are then taken
// over the domain (0 along broadcast dimensions); size-1 dimensions are
// dropped and neighbouring dimensions merged wherever every parameter walks
// them as one (like PyTorch's TensorIterator coalescing), so a contiguous
// elementwise chain is a rank-1 loop, a row-broadcast bias add a rank-2 one
// and an add of a transposed matrix a rank-2 one whose transposed parameter
// has inner stride class `any`. What is left — rank, dtypes, each
// parameter's innermost stride class and the body — is the kernel; sizes and
// strides are its arguments, offsets are where each parameter's pointer
// starts (runtime::KernelStep::offsets). Results are written contiguously,
// unless the caller gives their layouts.
// An op that reads its element's index (dropout) gets an index space: the
// contiguous strides of its result shape over the domain, coalesced with the
// parameters, so the index it reads is the element's row-major position in
// its result (codegen/kernel.h).
//
// A body that computes nothing (its result is an input or a movement of
// one) is a copy kernel. A body whose result is a `cat` lowers to one copy
// kernel per cat input, each writing its slice of the result. Every phase
// above (views, parameters, index spaces, the body, coalescing, naming,
// launch arguments) is the kernel builder's (codegen/kernel_builder.h),
// which the reductions' lowering (codegen/lowering_reduction.h) shares.
#pragma once

#include <span>
#include <vector>

#include "codegen/kernel.h"
#include "ir/graph.h"
#include "ir/layout.h"

namespace kiln::codegen {

/// What a kernel parameter is bound to.
struct ParamBinding {
  bool output = false;  ///< a result of the fusion node, else one of its inputs
  int index = 0;        ///< which input or result of the fusion node
  int64_t offset = 0;   ///< elements from where that value starts to where the parameter starts
  friend bool operator==(const ParamBinding&, const ParamBinding&) = default;
};

struct LoweredKernel {
  Kernel kernel;
  LaunchArgs launch;
  std::vector<ParamBinding> bindings;  ///< one per kernel parameter
};

/// Lowers `fusion` to the kernels that compute it, in launch order: one,
/// or one per input of a cat. `inputs` gives the layout of each fusion input
/// (contiguous for all when empty); `outputs` the layout each result is
/// written through (contiguous when empty; not for a cat), so that a copy
/// can write into a view (copy_: Note [Fills are kernels] in frontend/tensor.cpp).
std::vector<LoweredKernel> lowerFusionKernels(const ir::Node& fusion, std::span<const ir::Layout> inputs = {},
                                              std::span<const ir::Layout> outputs = {});

/// The one kernel of a fusion that is not a cat.
LoweredKernel lowerFusion(const ir::Node& fusion, std::span<const ir::Layout> inputs = {});

/// Coalesced domain of `domain` for operands with the given strides (one
/// vector per operand, aligned with `domain`). Exposed for tests.
void coalesce(std::vector<int64_t>& domain, std::vector<std::vector<int64_t>>& strides);

}  // namespace kiln::codegen
