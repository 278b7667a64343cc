// Type promotion as in PyTorch (torch.result_type): which dtype an op
// computes in when its operands' dtypes differ. The IR takes operands of one
// dtype only; dispatch() applies these rules and inserts `cast` nodes.
//
// The rules, from the PyTorch docs ("Type promotion"):
// - Categories are ordered bool < integer < floating. Two dtypes promote to
//   the higher category; within a category to the wider type (i32, i64 ->
//   i64; f16, f32 -> f32; anything, f64 -> f64), and f16 with bf16 -> f32.
// - Operands take part in three groups: tensors with dimensions, 0-d tensors,
//   and scalars (C++ numbers, like Python's wrapped numbers; a floating
//   scalar counts as the default float dtype f32, an integer one as i64, a
//   bool as bool). A group only matters when its category is higher than
//   every group before it: dimensioned tensors decide, then 0-d tensors,
//   then scalars. So f16[n] * 2.0 stays f16, i32[n] * 2.5 is f32, i64[n] + 2
//   stays i64, f32[n] + f64[] stays f32, but i32[n] + f64[] is f64.
// - Elementwise ops that only compute in floating point (dtype class
//   `floats` in ir/Ops.def: div, exp, log, ...) take f32, the default float
//   dtype, where the promoted dtype is an integer or bool, as PyTorch's true
//   division and unary float ops do.
#pragma once

#include <span>

#include "ir/op_registry.h"
#include "runtime/dtype.h"

namespace kiln::detail {

/// The dtype two dtypes promote to (torch.promote_types).
DType promoteTypes(DType a, DType b);

/// How an operand takes part in promotion.
enum class Participant : uint8_t {
  dimensioned,  ///< a tensor with at least one dimension
  zeroDim,      ///< a 0-d tensor
  scalar,       ///< a C++ number (Python's wrapped number)
};

struct PromotionOperand {
  DType dtype;  ///< for a scalar: f32 (floating), i64 (integer) or bool
  Participant participant;
};

/// The dtype the operands promote to together (torch.result_type).
/// `operands` must not be empty.
DType resultType(std::span<const PromotionOperand> operands);

/// Whether `op` computes only in floating point, so that integer and bool
/// operands promote to f32: the elementwise ops of dtype class `floats`
/// whose operands are promoted (ir::promotesOperands).
bool isFloatOnly(ir::Op op);

}  // namespace kiln::detail
