// The gradient formulas of the registry ops (DESIGN.md §3: each op's
// gradient lives here, and the switch over ir::Op has no default, so a new
// op cannot be added without deciding its gradient). Formulas are ordinary
// ops, so they run eagerly and trace alike. Internal to the frontend.
#pragma once

#include <span>

#include "frontend/dispatch.h"
#include "frontend/tensor.h"
#include "ir/attributes.h"
#include "ir/op_registry.h"

namespace kiln::autograd {

/// Attaches op's backward node to `result` (dispatch() calls this), when
/// grad mode is on and a tensor operand requires grad. Scalars get no gradient.
void recordOp(ir::Op op, std::span<const detail::Operand> operands, const ir::Attributes& attrs, const Tensor& result);

/// The gradient for the input (of shape `in`) of movement op `op` with
/// `attrs`, from the gradient `g` of its result.
Tensor movementBackward(ir::Op op, const ir::Attributes& attrs, const Shape& in, const Tensor& g);

}  // namespace kiln::autograd
