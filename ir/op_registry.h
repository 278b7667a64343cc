// The op registry: the Op enum generated from ir/Ops.def, each op's kind and
// arity, and its rules for result types (input checks included).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ir/attributes.h"
#include "ir/types.h"

namespace kiln::ir {

enum class Op : uint16_t {
#define KILN_OP(id, text, kind, arity) id,
#include "ir/Ops.def"
};

enum class OpKind : uint8_t {
  elementwise,  ///< one result element from the same-index input elements
  reduction,
  movement,  ///< views and copies
  library,   ///< BLAS, cuBLAS, cuDNN calls
  random,
  control,   ///< fusion and other ops holding regions
  constant,  ///< no inputs; a value fixed by attributes
};

struct OpInfo {
  Op op;
  std::string_view name;
  OpKind kind;
  int arity;  ///< number of inputs; -1 when any
};

/// The number of ops in Ops.def.
extern const int kNumOps;

const OpInfo& opInfo(Op op);
inline std::string_view opName(Op op) { return opInfo(op).name; }
/// Looks an op up by its text name.
std::optional<Op> parseOp(std::string_view name);
/// Every op, in Ops.def order.
std::span<const OpInfo> allOps();

/// The result type of `op` applied to inputs of `inputs` types, checking
/// arity, dtypes, devices and shapes (broadcasting for elementwise ops).
/// Elementwise operands must share one dtype (`where`: a bool condition and
/// two values of one dtype; `cast` takes any); add, sub, mul, neg and relu
/// reject bool, and div, exp, log, sqrt, tanh and sigmoid take floating-point
/// dtypes only. Comparisons give bool, cast its attribute `dtype`.
/// Throws kiln::Error naming the op and the input types. Not for fusion
/// (its types are its body's) nor constant (its type is its creator's).
TensorType inferType(Op op, std::span<const TensorType> inputs, const Attributes& attrs);

}  // namespace kiln::ir
