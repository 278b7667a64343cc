// The reductions of kiln, like libtorch's: kiln::sum(x, {1}), kiln::mean,
// kiln::amax, kiln::amin, kiln::argmax, kiln::max (values and indices),
// kiln::var; and the functions built on them, softmax, logSoftmax and
// layerNorm. Each reduction is one op of the registry (docs/ops.md,
// "Reductions"), the others are compositions of registry ops, so all of them
// run eagerly and trace under kiln::compile alike (and will fuse into one
// kernel per row once fuse-reductions exists).
//
// `dims` lists the dims to reduce (negative counts from the end); an empty
// list reduces every dim. With `keepdim` the reduced dims stay, with size 1.
// A dim out of range or repeated is a kiln::Error naming the function, the
// dims and the tensor: `sum: dim 1 is repeated in dims [1, -1] for
// f32[2,3]@cpu`.
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

/// The sum over `dims`. Integers and bool give i64, as in PyTorch; floats
/// keep their dtype and are added in f64 (docs/ops.md states the bound).
/// The sum of no elements is 0.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// The mean over `dims` (floats only): the f64 sum divided by the count,
/// rounded once. The mean of no elements is NaN.
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// The largest element over `dims`: NaN if any is NaN, -0 < +0. An error
/// over a dim of size 0.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// The smallest element over `dims`: NaN if any is NaN, -0 < +0.
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// The index (i64) along `dim` of the first largest element, or of the first
/// NaN, as torch.argmax. Not for bool.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// (amax, argmax) along `dim`, as torch::max(x, dim, keepdim): the values
/// and their indices, two kernels.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
/// The variance over `dims` (floats only) with `correction` subtracted from
/// the count, as torch.var (1: the unbiased estimate, 0: the biased one);
/// computed in two passes in f64. NaN when the count minus the correction is
/// not positive.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);

/// exp(x - amax(x, dim)) / sum(exp(x - amax(x, dim)), dim), as torch.softmax.
/// f16 and bf16 compute in f32 and round the result.
Tensor softmax(const Tensor& x, int64_t dim);
/// (x - m) - log(sum(exp(x - m), dim)) with m = amax(x, dim), as
/// torch.log_softmax.
Tensor logSoftmax(const Tensor& x, int64_t dim);

/// What layerNormWithStats returns: the output, and the mean and 1 /
/// sqrt(var + eps) of each normalized group (shaped like x, with the
/// normalized dims kept as size 1), as torch.native_layer_norm.
struct LayerNormResult {
  Tensor output;
  Tensor mean;
  Tensor rstd;
};

/// Layer normalization over the last normalizedShape.size() dims of x, which
/// must equal normalizedShape, as torch.layer_norm: (x - mean) * rstd *
/// weight + bias, with the mean and the biased variance computed in two
/// passes (the variance is the mean of (x - mean)²) and rstd = 1 /
/// sqrt(var + eps). weight and bias (undefined: none) have shape
/// normalizedShape. f16 and bf16 compute in f32 and round the results.
LayerNormResult layerNormWithStats(const Tensor& x, const Shape& normalizedShape, const Tensor& weight = {},
                                   const Tensor& bias = {}, double eps = 1e-5);
/// layerNormWithStats(...).output.
Tensor layerNorm(const Tensor& x, const Shape& normalizedShape, const Tensor& weight = {}, const Tensor& bias = {},
                 double eps = 1e-5);

}  // namespace kiln
