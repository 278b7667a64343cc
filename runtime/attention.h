// Fused attention on the CPU: the `attention` and `attention_backward`
// library calls of runtime/executable.h (docs/ops.md, "attention").
//
// attention computes, for each batch index b... (the leading dims, heads
// among them),
//
//   out[b] = dropout(softmax(q[b] · k[b]ᵀ · scale + mask[b]), p) · v[b]
//
// with q [Lq, E], k [Lk, E], v [Lk, Ev], the optional mask (additive, of q's
// dtype, or bool: false excludes the key) broadcast to [Lq, Lk], and a causal
// option that excludes key j from query i when j > i (PyTorch's
// is_causal=True: the upper-left triangle). The [Lq, Lk] score matrix is never
// stored: Note [Flash attention on the CPU] in runtime/attention.cpp.
//
// Dropout on the attention weights draws element (b..., i, j) of the weights
// [batch..., Lq, Lk] exactly as `dropout` draws that element of a tensor of
// that shape (Note [Dropout draws] in ir/scalar_formulas_random.h): the same
// seed and offset give the same mask as the unfused graph.
//
// attentionBackward computes the gradients of q, k and v from q, k, v, out
// and the gradient of out (the same mask, causal option, scale and dropout
// draw), into one contiguous buffer: dq [batch..., Lq, E], then dk
// [batch..., Lk, E], then dv [batch..., Lk, Ev].
//
// f32 and f64 (the only dtypes the IR gives it; the frontend decomposes the
// others). Results are deterministic for given shapes and thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/dtype.h"

namespace kiln::runtime {

/// How an operand is read: element (b..., i, j) of a [batch..., rows, cols]
/// view is at Σ batchStrides·b + rowStride·i + colStride·j (elements); a
/// stride of 0 broadcasts.
struct AttentionOperand {
  std::vector<int64_t> batchStrides;
  int64_t rowStride = 0, colStride = 0;
};

/// The arguments of one attention or attention_backward call.
struct AttentionCall {
  enum class Mask : uint8_t { none, additive, boolean };

  DType dtype = DType::f32;
  std::vector<int64_t> batch;  ///< the sizes of the batch dims
  int64_t lq = 0, lk = 0, e = 0, ev = 0;
  Mask mask = Mask::none;
  bool causal = false;
  double scale = 1.0;
  /// Dropout on the weights: seed and offset buffers follow the mask; an
  /// element is kept when the top 24 bits of its draw are >= dropThreshold
  /// (floor(p·2^24)) and then multiplied by dropScale (1 / (1 - p)), as
  /// `dropout` (ir/scalar_formulas_random.h computes both for the caller).
  bool dropout = false;
  int64_t dropThreshold = 0;
  double dropScale = 1.0;
  /// q, k, v, then mask when there is one; for the backward also out and
  /// its gradient (after v, before the mask).
  std::vector<AttentionOperand> operands;

  /// As the step's integer arguments, and back.
  std::vector<int64_t> encode() const;
  static AttentionCall decode(std::span<const int64_t> args);
};

/// The library call (CpuLibraryFn): buffers q, k, v, [mask], [seed, offset
/// (0-d i64)], out (contiguous [batch..., Lq, Ev]).
void attention(std::span<void* const> buffers, std::span<const int64_t> args);

/// The library call (CpuLibraryFn): buffers q, k, v, out, dout, [mask],
/// [seed, offset], grads (contiguous: dq, dk, dv one after the other).
void attentionBackward(std::span<void* const> buffers, std::span<const int64_t> args);

}  // namespace kiln::runtime
