// The op registry: the Op enum generated from ir/Ops.def, each op's kind and
// arity, and its rules for result types (input checks included).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

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
/// two values of one dtype; `cast` takes any); add, sub, mul, pow, neg, relu
/// and abs reject bool, and div, exp, log, sqrt, tanh, sigmoid, rsqrt, sin,
/// cos, erf, silu and gelu take floating-point dtypes only. Comparisons give
/// bool, cast its attribute `dtype`. dropout takes a float x and 0-d i64
/// seed and offset, and gives x's type. Reductions (ir/reduction_rules.cpp)
/// and library calls (ir/library_rules.cpp): see Ops.def and docs/ops.md.
/// Throws kiln::Error naming the op and the input types. Not for fusion
/// (its types are its body's) nor constant (its type is its creator's).
TensorType inferType(Op op, std::span<const TensorType> inputs, const Attributes& attrs);

/// Whether the scalar formula of elementwise `op` also reads the element's
/// row-major linear index in the op's result (dropout: a random draw per
/// element). Kernels and ir::evalScalar pass that index (i64) as one more
/// operand after the op's inputs; such an op is not a function of its
/// operands' values alone, so nothing may fold it or move it across a
/// movement op.
inline bool usesElementIndex(Op op) { return op == Op::dropout; }

/// Attribute `p` of a dropout node, checked: a float in [0, 1]. Throws
/// kiln::Error otherwise (`dropout: p must be in [0, 1], got 1.5`).
double dropoutP(const Attributes& attrs);

/// gelu's attribute `approximate`: 0 (default; the erf form) or 1 (the tanh
/// approximation). Throws kiln::Error for another value.
int geluApproximate(const Attributes& attrs);

/// Whether `op` is a reduction (OpKind::reduction).
inline bool isReduction(Op op) { return opInfo(op).kind == OpKind::reduction; }

/// `dims` of a tensor of `type`, each in [-rank, rank) (a 0-d tensor takes
/// -1 and 0, which reduce nothing), as sorted indices in [0, rank); an empty
/// list is every dim. Throws kiln::Error naming `what`, the dims and the type
/// when one is out of range or repeated: `sum: dim 2 of dims [0, 2] is out of
/// range for f32[2,3]@cpu (expected dims in [-2, 1])`.
std::vector<int> normalizeDims(std::string_view what, std::span<const int64_t> dims, const TensorType& type);

/// One `dim` of a tensor of `type`, in [-rank, rank) (a 0-d tensor takes -1
/// and 0), as an index in [0, max(rank, 1)). Throws kiln::Error naming
/// `what`: `softmax: dim 2 is out of range for f32[2,3]@cpu (expected a dim
/// in [-2, 1])`.
int normalizeDim(std::string_view what, int64_t dim, const TensorType& type);

/// What reduction `op` with `attrs` does to an input of `type`: the dims it
/// reduces (sorted, in [0, rank); argmax's one `dim`, the others' `dims`)
/// and whether they are kept as size 1. Throws kiln::Error as inferType does.
struct ReductionShape {
  std::vector<int> dims;
  bool keepdim = false;
};
ReductionShape reductionShape(Op op, const TensorType& type, const Attributes& attrs);

/// The shape of `shape` with `dims` (sorted) removed, or set to 1 when `keepdim`.
Shape reducedShape(const Shape& shape, std::span<const int> dims, bool keepdim);

}  // namespace kiln::ir
