// The autocast lists (frontend/amp/autocast.h): which ops run in the low
// precision and which in f32, as one table keyed by op name
// (autocast_policy.cpp), and the casts they call for. The registry's ops
// are looked up from detail::dispatch; the frontend functions that are
// compositions of ops (linear, softmax, layer_norm, the losses) look up
// their own name on entry, so that they cast once, as PyTorch's single
// kernels do, and their inner ops find their operands already cast.
#pragma once

#include <string_view>

#include "frontend/tensor.h"
#include "ir/op_registry.h"

namespace kiln::detail {

/// What autocast does to an op's floating-point operands (PyTorch's
/// CastPolicy): nothing, the scope's low dtype, or f32.
enum class CastPolicy : uint8_t { none, lowerPrecision, f32 };

/// The policy of the op or frontend function called `name` ("matmul",
/// "softmax", "cross_entropy", ...).
CastPolicy castPolicy(std::string_view name);
/// The same for a registry op, from a table indexed by op.
CastPolicy castPolicy(ir::Op op);

/// Whether any autocast scope is on for this thread (a cheap test).
bool anyAutocast();

/// `t` as the op of policy `policy` takes it inside the current autocast
/// state: cast when it is a floating-point tensor other than f64 on a
/// device type with autocast on, else `t` itself. A low-precision cast of a
/// leaf that requires grad is cached for the scope.
Tensor autocastArg(const Tensor& t, CastPolicy policy);

/// autocastArg with the policy of `name`; for the composite functions:
///   Tensor linear(x, w, b) { x = autocastArg("linear", x); ... }
Tensor autocastArg(std::string_view name, const Tensor& t);

}  // namespace kiln::detail
