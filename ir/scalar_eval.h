// The C++ evaluator of the scalar formulas: the builder that instantiates
// ir/scalar_formulas.h on plain floats. Constant folding uses it, and tests
// compare generated kernels against it bit for bit (Note [Eager equals compiled]).
#pragma once

#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"

namespace kiln::ir {

/// `op` on f32 inputs, exactly as every kernel computes it.
float evalScalarF32(Op op, std::span<const float> inputs, const Attributes& attrs = {});

}  // namespace kiln::ir
