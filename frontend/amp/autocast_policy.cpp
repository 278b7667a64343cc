// The autocast lists (frontend/amp/autocast_policy.h), after PyTorch's
// aten/src/ATen/autocast_mode.cpp (CPU and CUDA lists). Only ops kiln has are
// listed; an op that is not is left to ordinary type promotion (PyTorch's
// "promote" and unlisted ops), so add(bf16, f32) is f32.
#include "frontend/amp/autocast_policy.h"

#include <array>
#include <utility>

namespace kiln::detail {

namespace {
// One line an op: its name (a registry op's text name, or the frontend
// function's PyTorch name) and where autocast runs it.
constexpr std::pair<std::string_view, CastPolicy> kPolicies[] = {
    // PyTorch's lower_precision_fp list: the products.
    {"matmul", CastPolicy::lowerPrecision},
    {"linear", CastPolicy::lowerPrecision},
    {"conv2d", CastPolicy::lowerPrecision},
    {"conv_transpose2d", CastPolicy::lowerPrecision},
    // PyTorch's fp32 list: ranges or accumulations that f16/bf16 lose.
    {"exp", CastPolicy::f32},
    {"log", CastPolicy::f32},
    {"pow", CastPolicy::f32},
    {"sum", CastPolicy::f32},
    {"mean", CastPolicy::f32},
    {"softmax", CastPolicy::f32},
    {"log_softmax", CastPolicy::f32},
    {"layer_norm", CastPolicy::f32},
    {"mse_loss", CastPolicy::f32},
    {"nll_loss", CastPolicy::f32},
    {"cross_entropy", CastPolicy::f32},
};

std::array<CastPolicy, ir::kNumOps> byOp() {
  std::array<CastPolicy, ir::kNumOps> table{};
  for (int i = 0; i < ir::kNumOps; ++i) table[static_cast<size_t>(i)] = castPolicy(ir::opName(static_cast<ir::Op>(i)));
  return table;
}
}  // namespace

CastPolicy castPolicy(std::string_view name) {
  for (const auto& [op, policy] : kPolicies)
    if (op == name) return policy;
  return CastPolicy::none;
}

CastPolicy castPolicy(ir::Op op) {
  static const std::array<CastPolicy, ir::kNumOps> table = byOp();
  return table[static_cast<size_t>(op)];
}

Tensor autocastArg(std::string_view name, const Tensor& t) {
  if (!anyAutocast()) return t;
  return autocastArg(t, castPolicy(name));
}

}  // namespace kiln::detail
