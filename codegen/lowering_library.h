// Lowering of a library node (ir::OpKind::library: matmul, index_select,
// index_add) to the call of its runtime function (runtime/blas.h,
// runtime/indexing.h, or a device's own): which function, and its integer arguments — sizes,
// and the strides each operand is read through. Operands keep their
// layouts (a transposed weight goes to BLAS as it is, an expanded batch dim
// is a stride of 0); the result is contiguous. The node's operands, then its
// result, are the call's buffers, each bound where its layout starts
// (runtime::LibraryStep::offsets).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ir/graph.h"
#include "ir/layout.h"
#include "runtime/executable.h"

namespace kiln::codegen {

struct LoweredCall {
  std::string name;  ///< "matmul_f32", "index_select_f16", ...
  runtime::LibraryFn fn = nullptr;
  bool recordable = false;  ///< LibraryFunction::recordable
  /// LibraryFunction::withEpilogue, where this call takes one (a conv2d
  /// takes one, a conv_transpose2d does not).
  runtime::LibraryFn withEpilogue = nullptr;
  std::vector<int64_t> args;
};

/// Lowers library node `node` whose operands are laid out as `inputs` (one
/// per operand: strides in elements; the offsets are the caller's to bind)
/// to a call of its function in `functions` (a target's). kiln::Error when
/// that target has none.
LoweredCall lowerLibrary(const ir::Node& node, std::span<const ir::Layout> inputs, const LibraryFunctions& functions);

}  // namespace kiln::codegen
