// The C++ evaluator of the scalar formulas: the builder that instantiates
// ir/scalar_formulas.h on plain C++ numbers. Constant folding uses it, and
// tests compare generated kernels and eager results against it bit for bit
// (Note [Eager equals compiled]).
#pragma once

#include <cstdint>
#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "runtime/dtype.h"

namespace kiln::ir {

/// One element of any dtype, as a kernel holds it: floats in `f` (an f32,
/// f16 or bf16 value is the float it widens to, so f32 values convert to
/// double and back exactly), i32, i64 and bool (0 or 1) in `i`.
struct ScalarValue {
  DType dtype = DType::f32;
  double f = 0;
  int64_t i = 0;

  /// `v` of `dtype`, converted as a constant of that dtype is (floats round
  /// to nearest even, f16/bf16 through f32; integers saturate; bool is v != 0).
  static ScalarValue of(DType dtype, double v);
  /// The integer `v` as `dtype` (i32 wraps; floats round; bool is v != 0).
  static ScalarValue ofInt(DType dtype, int64_t v);
  /// The value as a double (exact except for i64 beyond 2^53).
  double toDouble() const;
};

/// `op` on `inputs`, exactly as every kernel computes it. The result dtype
/// is the registry's (ir::inferType), which also checks the input dtypes and
/// throws kiln::Error as inferType does; `constant` gives its `value`
/// attribute as f32. An op that reads the element's index
/// (ir::usesElementIndex: dropout, rand, randn) takes that index as one
/// more i64 input after its own: evalScalar(Op::dropout, {x, seed, offset,
/// index}, {{"p", 0.1}}).
ScalarValue evalScalar(Op op, std::span<const ScalarValue> inputs, const Attributes& attrs = {});

/// `op` on inputs of dtype `dtype` (for `where`, the values'; its condition
/// is input 0 != 0; for a draw (dropout, rand, randn) the last three are
/// i64: seed, offset, index),
/// each converted to `dtype` as ScalarValue::of does; the
/// result (of the op's result dtype, or `dtype` for `constant`) as a double.
double evalScalar(Op op, DType dtype, std::span<const double> inputs, const Attributes& attrs = {});

/// `op` on f32 inputs, exactly as every kernel computes it. A result of
/// another dtype (comparisons: bool; cast) is returned converted to float.
float evalScalarF32(Op op, std::span<const float> inputs, const Attributes& attrs = {});

}  // namespace kiln::ir
