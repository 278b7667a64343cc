// The normalizations over channels, like libtorch's
// torch::nn::functional: kiln::batchNorm and kiln::groupNorm, with
// PyTorch's semantics (layerNorm, over the last dims, is in
// frontend/reductions.h). Compositions of registry ops (frontend/batch_norm.cpp),
// so they run eagerly and trace under kiln::compile alike.
#pragma once

#include <cstdint>

#include "frontend/tensor.h"

namespace kiln {

/// Batch normalization of x [N, C, *] per channel, as
/// torch.nn.functional.batch_norm. In training, the statistics are the mean
/// and the biased variance of each channel over the batch and spatial dims
/// (more than one value per channel, or an error), and the running
/// statistics (when defined) are updated in place, without gradient:
/// running = (1 - momentum) * running + momentum * batch statistic, the
/// variance's unbiased. Otherwise the running statistics (which must be
/// defined) normalize. y = (x - mean) / sqrt(var + eps) * weight + bias;
/// runningMean, runningVar, weight and bias are [C] (weight and bias
/// undefined: none). f16 and bf16 compute in f32 and round the result.
Tensor batchNorm(const Tensor& x, const Tensor& runningMean, const Tensor& runningVar, const Tensor& weight = {},
                 const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);

/// Group normalization of x [N, C, *], as torch.nn.functional.group_norm:
/// the C channels in numGroups groups of consecutive channels (C divisible
/// by numGroups), each group of each sample normalized over its channels and
/// spatial dims with the biased variance, then y * weight + bias per
/// channel (weight and bias [C], undefined: none). f16 and bf16 compute in
/// f32.
Tensor groupNorm(const Tensor& x, int64_t numGroups, const Tensor& weight = {}, const Tensor& bias = {},
                 double eps = 1e-5);

namespace detail {
/// x in the dtype the normalizations and pools compute in (f32 for f16 and
/// bf16, as PyTorch's kernels accumulate in float), after checking that it
/// is a defined floating-point tensor; kiln::Error naming `op` otherwise.
Tensor floatComputeInput(const char* op, const Tensor& x);
}  // namespace detail

}  // namespace kiln
