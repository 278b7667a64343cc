// nn::utils::clipGradNorm_, torch.nn.utils.clip_grad_norm_: scales the
// gradients of a set of parameters in place so that their joint norm is at
// most maxNorm.
#pragma once

#include <vector>

#include "frontend/tensor.h"

namespace kiln::nn::utils {

/// The norm of all the gradients together (parameters without one are
/// skipped), as if concatenated: the p-norm for normType p > 0, the largest
/// |element| for infinity. Each gradient is then multiplied by
/// min(1, maxNorm / (norm + 1e-6)), as PyTorch does. Returns the norm (0-d
/// f32 on the gradients' device; 0 when no parameter has a gradient).
/// With errorIfNonfinite, a NaN or infinite norm is a kiln::Error before
/// anything is scaled. Computed in f32 (f64 gradients in f64).
Tensor clipGradNorm_(const std::vector<Tensor>& parameters, double maxNorm, double normType = 2.0,
                     bool errorIfNonfinite = false);

}  // namespace kiln::nn::utils
