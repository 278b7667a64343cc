// kiln::scaledDotProductAttention, torch.nn.functional.scaled_dot_product_attention:
// softmax(q·kᵀ·scale + mask) with dropout on the weights, times v. On the
// CPU in f32 and f64 it is one `attention` op (fused: runtime/attention.h,
// no [Lq, Lk] matrix in memory, its own backward); elsewhere the unfused
// ops, which give the same values to a tolerance and the same dropout mask
// (docs/ops.md, "attention").
#pragma once

#include <optional>

#include "frontend/random.h"
#include "frontend/tensor.h"

namespace kiln {

struct AttentionOptions {
  /// Broadcasts to the weights' shape [..., Lq, Lk]: bool (true: the key
  /// takes part, as PyTorch's) or of q's dtype (added to the scores).
  /// Undefined: no mask. It gets no gradient.
  Tensor attnMask;
  /// Dropout on the weights, in [0, 1): drawn from `generator` as
  /// kiln::dropout draws (one advance per call), always applied when > 0,
  /// as PyTorch's dropout_p.
  double dropoutP = 0.0;
  /// Key j is excluded from query i when j > i (PyTorch's is_causal: the
  /// upper-left triangle). Unlike PyTorch, may be combined with attnMask.
  bool isCausal = false;
  /// Default 1 / sqrt(E).
  std::optional<double> scale;
  /// Default: kiln::defaultGenerator().
  Generator* generator = nullptr;
};

/// q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev], one floating dtype, one
/// device; batch dims broadcast. Returns [..., Lq, Ev]. A query row that
/// sees no key (all masked) is NaN, as softmax over -inf is. kiln::Error
/// naming the shapes, dtypes and devices for anything else.
Tensor scaledDotProductAttention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {});

}  // namespace kiln
