// The `attention` and `attention_backward` ops (ir/Ops.def): where their
// optional operands are, their attributes, their type rules, and where they
// run as one fused op (docs/ops.md, "attention").
#pragma once

#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir {

/// An attention or attention_backward node's operands and attributes.
struct AttentionOperands {
  int data = 3;   ///< q, k, v (attention_backward: also out and dout)
  int mask = -1;  ///< the mask's operand, or -1
  int seed = -1;  ///< dropout's seed (offset is the next), or -1
  double scale = 1.0;
  bool causal = false;
  double p = 0.0;
};
/// Reads them from the op, its operand count and its attributes; kiln::Error
/// when the count does not fit the attributes or an attribute is missing or
/// out of range.
AttentionOperands attentionOperands(Op op, int numInputs, const Attributes& attrs);

/// Whether attention of this dtype runs as the one fused op on `device`:
/// the CPU's library call (runtime/attention.h) takes f32 and f64. Elsewhere
/// (and for f16 and bf16) kiln::scaledDotProductAttention writes the unfused
/// ops and the fuse-attention pass leaves them. The one place to change when
/// a device gets a fused kernel.
bool fusedAttentionOn(const Device& device, DType dtype);

namespace detail {
/// The result types of attention and attention_backward (ir::inferType).
TensorType inferAttention(Op op, std::span<const TensorType> in, const Attributes& attrs);
}  // namespace detail

}  // namespace kiln::ir
