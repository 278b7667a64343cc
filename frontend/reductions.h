// The reductions of kiln, like libtorch's: kiln::sum(x, {1}), kiln::mean,
// kiln::amax, kiln::amin, kiln::argmax, kiln::max (values and indices),
// kiln::var. Each reduction is one op of the registry (docs/ops.md,
// "Reductions"), so all of them run eagerly and trace under kiln::compile
// alike.
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

}  // namespace kiln
