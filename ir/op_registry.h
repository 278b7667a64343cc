// The op registry: the Op enum and the op table generated from ir/Ops.def,
// each op's kind, arity and facts (dtype class, recompute cost, traits) with
// one query per fact, and its rules for result types (input checks included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/attributes.h"
#include "ir/types.h"

namespace kiln::ir {

enum class Op : uint16_t {
#define KILN_OP(id, ...) id,
#include "ir/Ops.def"
};

/// The number of ops in Ops.def; tables indexed by op check their size
/// against it (static_assert).
inline constexpr int kNumOps = 0
#define KILN_OP(...) +1
#include "ir/Ops.def"
    ;

enum class OpKind : uint8_t {
  elementwise,  ///< one result element from the same-index input elements
  reduction,
  movement,  ///< views and copies
  library,     ///< BLAS, cuBLAS, cuDNN calls
  collective,  ///< communication with other ranks through a process group
  control,   ///< fusion and other ops holding regions
  constant,  ///< no inputs; a value fixed by attributes
};

/// The dtypes an op takes (column `dtypes` of Ops.def).
enum class DTypeClass : uint8_t {
  any,
  numbers,  ///< every dtype but bool
  floats,   ///< f32, f64, f16, bf16
};

/// Facts about an op (column `traits` of Ops.def, which says what each means).
enum class OpTrait : uint16_t {
  none = 0,
  differentiable = 1 << 0,
  commutative = 1 << 1,
  comparison = 1 << 2,
  elementIndex = 1 << 3,
  checksData = 1 << 4,
  view = 1 << 5,
  exactOperands = 1 << 6,
  barrier = 1 << 7,
};
constexpr OpTrait operator|(OpTrait a, OpTrait b) {
  return static_cast<OpTrait>(static_cast<uint16_t>(a) | static_cast<uint16_t>(b));
}

struct OpInfo {
  Op op;
  std::string_view name;
  OpKind kind;
  int arity;          ///< number of inputs; -1 when any
  DTypeClass dtypes;  ///< what its data operands (rand, randn: its result) may be
  int cost;           ///< ir::recomputeCost
  OpTrait traits;     ///< OpTrait flags
};

namespace table {
using enum OpTrait;
/// One row per line of Ops.def, in its order (so indexed by Op).
inline constexpr OpInfo kOps[] = {
#define KILN_OP(id, text, kind, arity, dtypes, cost, traits) \
  {Op::id, text, OpKind::kind, arity, DTypeClass::dtypes, cost, traits},
#include "ir/Ops.def"
};
static_assert(std::size(kOps) == kNumOps, "one row per op");
constexpr bool inOrder() {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (static_cast<size_t>(kOps[i].op) != i) return false;
  return true;
}
static_assert(inOrder(), "the table is indexed by Op");
}  // namespace table

constexpr const OpInfo& opInfo(Op op) { return table::kOps[static_cast<size_t>(op)]; }
constexpr std::string_view opName(Op op) { return opInfo(op).name; }
/// Looks an op up by its text name.
std::optional<Op> parseOp(std::string_view name);
/// Every op, in Ops.def order.
constexpr std::span<const OpInfo> allOps() { return table::kOps; }

/// Whether `op` has trait `t` (Ops.def, column `traits`).
constexpr bool hasTrait(Op op, OpTrait t) {
  return (static_cast<uint16_t>(opInfo(op).traits) & static_cast<uint16_t>(t)) != 0;
}

/// The dtypes `op` takes: of its data operands (every operand of an
/// elementwise op but `where`'s condition and a draw's seed and offset), or
/// for rand and randn of their result.
constexpr DTypeClass dtypeClass(Op op) { return opInfo(op).dtypes; }
/// Whether `dtype` is one of class `c`.
inline bool inDTypeClass(DType dtype, DTypeClass c) {
  switch (c) {
    case DTypeClass::any: return true;
    case DTypeClass::numbers: return dtype != DType::boolean;
    case DTypeClass::floats: return isFloatingPoint(dtype);
  }
  return false;
}
/// Checks that `dtype` is of `op`'s class; throws kiln::Error naming `op`
/// and `got` (the input types) otherwise: `exp: expected a floating-point
/// dtype (f32, f64, f16, bf16), got i32[2]@cpu`, `argmax: dtype bool is not
/// supported, got bool[3]@cpu` (`note`, when given, follows "supported").
void checkDTypeClass(Op op, DType dtype, std::string_view got, std::string_view note = {});

/// What recomputing one element of `op` costs, roughly in vector
/// instructions: 1 for plain arithmetic, 2 for a division or square root,
/// 8 for a polynomial (exp, log, ...), 24 for a Philox draw. Kernels weigh
/// it before recomputing a row value in a later pass rather than keeping it
/// (Note [Stashed row values] in codegen/kernel.cpp).
constexpr int recomputeCost(Op op) { return opInfo(op).cost; }
/// Whether `op` has a gradient (false: its results never require grad).
constexpr bool isDifferentiable(Op op) { return hasTrait(op, OpTrait::differentiable); }
/// Whether op(a, b) gives the bits of op(b, a), NaN payloads aside (add, mul, eq, ne).
constexpr bool isCommutative(Op op) { return hasTrait(op, OpTrait::commutative); }
/// Whether `op` compares its operands: its result is bool.
constexpr bool isComparison(Op op) { return hasTrait(op, OpTrait::comparison); }
/// Whether `op` checks its operands' values when it runs and may fail on
/// them (index_select and index_add: an index out of range), after its
/// program has started.
constexpr bool checksData(Op op) { return hasTrait(op, OpTrait::checksData); }
/// Whether `op` is a view of its one input (reshape, transpose, slice,
/// expand): ir::movedLayout gives its strides.
constexpr bool isViewOp(Op op) { return hasTrait(op, OpTrait::view); }
/// Whether the frontend promotes `op`'s operands to one dtype (PyTorch's
/// type promotion) before it builds the op; the others (library calls,
/// cast, draws) take each operand in its own dtype.
constexpr bool promotesOperands(Op op) { return !hasTrait(op, OpTrait::exactOperands); }
/// Whether no pass looks through `op` (opt_barrier): cse leaves it alone and
/// fusion never groups it with its neighbours (a kernel of its own).
constexpr bool isBarrier(Op op) { return hasTrait(op, OpTrait::barrier); }
/// Whether `op` is a reduction (OpKind::reduction).
constexpr bool isReduction(Op op) { return opInfo(op).kind == OpKind::reduction; }

/// Whether the scalar formula of elementwise `op` also reads the element's
/// row-major linear index in the op's result (dropout: a random draw per
/// element). Kernels and ir::evalScalar pass that index (i64) as one more
/// operand after the op's inputs; such an op is not a function of its
/// operands' values alone, so nothing may fold it or move it across a
/// movement op. Its last two operands are its draw's seed and offset.
constexpr bool usesElementIndex(Op op) { return hasTrait(op, OpTrait::elementIndex); }

/// The result type of `op` applied to inputs of `inputs` types, checking
/// arity, dtypes, devices and shapes (broadcasting for elementwise ops).
/// Elementwise operands must share one dtype (`where`: a bool condition and
/// two values of one dtype), of the op's dtype class (Ops.def: bool is
/// refused by `numbers`, integers and bool by `floats`); comparisons give
/// bool, cast its attribute `dtype`, the others their operands' dtype. An op
/// that draws (usesElementIndex) takes 0-d i64 seed and offset last:
/// dropout gives its x's type, rand and randn that of their attributes
/// `dtype` (floats) and `shape`. Reductions (ir/reduction_rules.cpp) and
/// library calls (ir/library_rules.cpp): see Ops.def and docs/ops.md.
/// Throws kiln::Error naming the op and the input types. Not for fusion
/// (its types are its body's) nor constant (its type is its creator's).
TensorType inferType(Op op, std::span<const TensorType> inputs, const Attributes& attrs);

/// Attribute `p` of a dropout node, checked: a float in [0, 1]. Throws
/// kiln::Error otherwise (`dropout: p must be in [0, 1], got 1.5`).
double dropoutP(const Attributes& attrs);

/// gelu's attribute `approximate`: 0 (default; the erf form) or 1 (the tanh
/// approximation). Throws kiln::Error for another value.
int geluApproximate(const Attributes& attrs);

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
