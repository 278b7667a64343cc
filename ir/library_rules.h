// The type rules of the library-call ops (matmul, index_select, index_add),
// which ir::inferType calls; internal to ir/. What the ops compute is in
// Ops.def and docs/ops.md ("Library calls").
#pragma once

#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir::detail {

/// The result type of library op `op` on `in` (arity is checked by the
/// caller). Throws kiln::Error naming the op and the input types.
TensorType inferLibrary(Op op, std::span<const TensorType> in, const Attributes& attrs);

}  // namespace kiln::ir::detail
