// Writing values into eager tensors in place: what the in-place ops
// (frontend/inplace.cpp) and the write-back of a compiled program
// (frontend/compile.cpp) share. Internal to the frontend.
#pragma once

#include "frontend/tensor.h"

namespace kiln::detail {

/// Stores `value` (same shape and dtype, eager) into the elements of the
/// eager tensor `target` through its strides, or, when nothing else can see
/// either storage, makes `target` take value's storage instead of copying
/// (Note [In-place ops]); then bumps target's version.
void storeInto(const Tensor& target, Tensor&& value);

}  // namespace kiln::detail
