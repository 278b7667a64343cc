// Loss functions, as torch.nn.functional's: mseLoss, nllLoss, crossEntropy.
// Each is a composition of registry ops (a one-hot mask made by comparing
// the targets with an arange of the classes picks the target entries, no
// gather), so that each runs eagerly, traces under kiln::compile, fuses, and
// gets its gradient from the ops' formulas.
#pragma once

#include <cstdint>

#include "frontend/tensor.h"

namespace kiln {

/// How a loss combines the per-element losses, as PyTorch's `reduction`.
enum class Reduction : uint8_t { none, mean, sum };

/// (input - target)², reduced; the two broadcast (PyTorch warns when their
/// shapes differ; kiln accepts what broadcasts).
Tensor mseLoss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

struct NllOptions {
  Tensor weight;              ///< per class, [C]; undefined: all 1
  int64_t ignoreIndex = -100;  ///< targets equal to it count nowhere
  Reduction reduction = Reduction::mean;
};

/// The negative log-likelihood of class indices: input is log-probabilities
/// [N, C] (or [C], or [N, C, d1, ...] with classes in dim 1), target holds
/// class indices (i64 or i32) of shape [N] ([], [N, d1, ...]); the loss of
/// element i is -weight[t_i] * input[i, t_i]; mean divides by the sum of the
/// weights of the targets that are not ignored (NaN when there are none), as
/// torch.nn.functional.nll_loss. A target outside [0, C) other than
/// ignoreIndex is a kiln::Error (checked eagerly; not while tracing).
Tensor nllLoss(const Tensor& input, const Tensor& target, const NllOptions& options = {});

struct CrossEntropyOptions {
  Tensor weight;
  int64_t ignoreIndex = -100;
  Reduction reduction = Reduction::mean;
  double labelSmoothing = 0.0;  ///< in [0, 1]; not with weight (an error)
};

/// nllLoss(logSoftmax(input, classDim), target) for class-index targets, as
/// torch.nn.functional.cross_entropy; a floating-point target of input's
/// shape is class probabilities instead: -sum(target * logSoftmax(input)).
Tensor crossEntropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

}  // namespace kiln
