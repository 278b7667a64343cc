// The type rules of the reduction ops (sum, mean, amax, amin, argmax, var),
// which ir::inferType calls; internal to ir/. The public helpers (dims
// normalization, reduced shapes) are declared in ir/op_registry.h.
#pragma once

#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir::detail {

/// The result type of reduction `op` on `in` (one input; arity is checked
/// by the caller). Throws kiln::Error naming the op, the dims and the type.
TensorType inferReduction(Op op, std::span<const TensorType> in, const Attributes& attrs);

}  // namespace kiln::ir::detail
