// The one entry point of every frontend op (DESIGN.md §2): check the
// operands, then either run the op eagerly — as a one-node graph compiled
// once per signature and cached — or, inside kiln::compile, append it to the
// graph being traced.
#pragma once

#include <span>
#include <vector>

#include "frontend/tensor.h"
#include "ir/attributes.h"
#include "ir/op_registry.h"

namespace kiln::detail {

/// An op operand: a tensor or a scalar (which takes the tensors' dtype and
/// device; eager code passes it as a 0-d tensor, traced code as a constant).
struct Operand {
  Operand(const Tensor& t) : tensor(t) {}  // NOLINT: implicit on purpose
  Operand(double v) : scalar(v), isScalar(true) {}  // NOLINT
  Tensor tensor;
  double scalar = 0;
  bool isScalar = false;
};

/// Runs or traces `op` and returns its result.
Tensor dispatch(ir::Op op, std::vector<Operand> operands, const ir::Attributes& attrs = {});

/// Statistics of the eager path, for tests and kiln-bench.
struct EagerStats {
  int64_t calls = 0;
  int64_t graphsBuilt = 0;  ///< one-node graphs lowered (eager cache misses)
};
EagerStats eagerStats();

}  // namespace kiln::detail
