// The one entry point of every frontend op (DESIGN.md §2): check the
// operands, promote their dtypes (frontend/promotion.h) with `cast` nodes
// where they differ, then either run the op eagerly — as a small graph (the
// casts and the op) compiled once per signature and cached — or, inside
// kiln::compile, append the same nodes to the graph being traced.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attributes.h"
#include "ir/op_registry.h"

namespace kiln::detail {

/// An op operand: a tensor or a C++ number. A number takes part in type
/// promotion by its category (bool, integer, floating; frontend/promotion.h)
/// and then has the op's dtype; eager code passes it as a 0-d tensor, traced
/// code as a constant.
struct Operand {
  enum class Kind : uint8_t { tensor, boolean, integer, floating };

  Operand(const Tensor& t) : tensor(t) {}  // NOLINT: implicit on purpose
  template <typename S>
  requires std::is_arithmetic_v<S> Operand(S v)  // NOLINT: implicit on purpose
      : isScalar(true) {
    if constexpr (std::is_same_v<S, bool>) {
      kind = Kind::boolean;
      intScalar = v;
      scalar = v ? 1.0 : 0.0;
    } else if constexpr (std::is_integral_v<S>) {
      kind = Kind::integer;
      intScalar = static_cast<int64_t>(v);
      scalar = static_cast<double>(v);
    } else {
      kind = Kind::floating;
      scalar = static_cast<double>(v);
    }
  }

  Tensor tensor;
  double scalar = 0;      ///< the number (for integers, as a double)
  int64_t intScalar = 0;  ///< the number, exactly, for integers and bool
  bool isScalar = false;
  Kind kind = Kind::tensor;
};

/// Runs or traces `op` and returns its result.
Tensor dispatch(ir::Op op, std::vector<Operand> operands, const ir::Attributes& attrs = {});

/// The eager path of an op that is not one dispatched node (copies, cat):
/// runs the executable cached under `key` and the inputs' types and strides,
/// built from the graph `build` makes (its inputs are `inputs`, read through
/// their strides) on a miss. Returns its one result, of type `out`, contiguous.
/// With `into` defined (an eager tensor of type `out`), the one result is
/// written into its elements through its strides (a view writes into its
/// base), and `into` is returned.
Tensor runEagerGraph(const std::string& key, const std::vector<Tensor>& inputs, const ir::TensorType& out,
                     const std::function<std::unique_ptr<ir::Graph>()>& build, const Tensor& into = {});

/// The dtype `op` computes in for these operands: PyTorch's result type,
/// f32 for a float-only op on integers or bool; for `where`, that of its
/// values (operand 0 is the condition). Exposed for tests.
DType promotedDType(ir::Op op, std::span<const Operand> operands);

/// Statistics of the eager path, for tests and kiln-bench.
struct EagerStats {
  int64_t calls = 0;
  int64_t graphsBuilt = 0;  ///< eager graphs lowered (eager cache misses)
};
EagerStats eagerStats();

}  // namespace kiln::detail
