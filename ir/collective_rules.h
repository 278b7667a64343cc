// The type rules of the collective ops (all_reduce), which ir::inferType
// calls, and the reading of their attributes for codegen. What the ops
// compute is in Ops.def and docs/ops.md ("Collectives").
#pragma once

#include <span>
#include <string_view>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir {

/// The process group a collective node runs on: its `group` attribute, the
/// group's id in this process (runtime::dist::groupId); kiln::Error naming
/// `op` when it is missing or negative.
int64_t collectiveGroup(const Attributes& attrs, std::string_view op);
/// The reduction of an all_reduce: its `op` attribute, one of sum, avg,
/// min, max, product; kiln::Error naming `op` otherwise.
std::string_view collectiveReduceOp(const Attributes& attrs, std::string_view op);

namespace detail {
/// The result type of collective op `op` on `in` (arity is checked by the
/// caller). Throws kiln::Error naming the op, the input type and the bad
/// attribute.
TensorType inferCollective(Op op, std::span<const TensorType> in, const Attributes& attrs);
}  // namespace detail

}  // namespace kiln::ir
