// Padding, pooling and resizing of NCHW images, like libtorch's
// torch::nn::functional: kiln::pad, kiln::maxPool2d, kiln::avgPool2d,
// kiln::adaptiveAvgPool2d and kiln::interpolate, with PyTorch's semantics
// (output sizes, ceil mode, padding rules, tie breaking, index formulas).
// None is an IR op: each is a composition of registry ops (strided slice
// views, maximum, add, where, index_select, cat; docs/convolution.md,
// "Pooling, normalization, padding and resizing"), so they run eagerly and
// trace under kiln::compile on every device, and the fusion passes turn the
// k*k strided views of a pool into one elementwise kernel.
//
// Images are [N, C, H, W] or unbatched [C, H, W] (pad: any rank), as
// PyTorch accepts; interpolate takes [N, C, H, W] only. A bad argument is a
// kiln::Error naming the function and the tensor.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

/// x padded as torch.nn.functional.pad: `pads` holds (before, after) pairs
/// starting from the last dim ({left, right, top, bottom, ...}). Modes:
/// "constant" (filled with `value`; negative pads crop), "reflect" (the
/// mirror image without the edge, pads < size), "replicate" (the edge
/// repeated) and "circular" (wrapped around, pads <= size). As in
/// PyTorch, the non-constant modes pad the last 1, 2 or 3 dims of a tensor
/// with one or two more dims than that.
Tensor pad(const Tensor& x, std::vector<int64_t> pads, std::string_view mode = "constant", double value = 0);

/// Kernel, stride, padding and dilation of a 2-d pool, (height, width).
using Size2 = std::array<int64_t, 2>;

/// What maxPool2dWithIndices returns: the maxima, and where each was (an
/// i64 flat index h * W + w into its input plane), as PyTorch's
/// max_pool2d_with_indices.
struct MaxPoolResult {
  Tensor values;
  Tensor indices;
};

/// The maximum of each kernel window, as torch.nn.functional.max_pool2d:
/// `stride` empty means the kernel size; the input is padded with -inf
/// (padding <= kernel / 2), the window's elements are `dilation` apart, and
/// with `ceilMode` a last partial window counts if it starts inside the
/// input or its left padding. NaN wins. The gradient goes whole to the
/// element PyTorch's index names (the first maximum in window order, the
/// last NaN), not split among ties.
Tensor maxPool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = {0, 0},
                 Size2 dilation = {1, 1}, bool ceilMode = false);
/// maxPool2d's values and their indices.
MaxPoolResult maxPool2dWithIndices(const Tensor& x, Size2 kernel, std::optional<Size2> stride = std::nullopt,
                                   Size2 padding = {0, 0}, Size2 dilation = {1, 1}, bool ceilMode = false);

/// The mean of each kernel window, as torch.nn.functional.avg_pool2d: zero
/// padding (padding <= kernel / 2); the divisor is the window's size
/// clipped to the padded input (countIncludePad) or to the input itself,
/// or `divisorOverride` when given. f16 and bf16 add in f32.
Tensor avgPool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = {0, 0},
                 bool ceilMode = false, bool countIncludePad = true,
                 std::optional<int64_t> divisorOverride = std::nullopt);

/// The mean over PyTorch's adaptive bins, as
/// torch.nn.functional.adaptive_avg_pool2d: output row i averages input rows
/// floor(i H / oh) to ceil((i + 1) H / oh) (exclusive), likewise columns.
Tensor adaptiveAvgPool2d(const Tensor& x, Size2 outputSize);

/// How interpolate resizes: to `size`, or by `scaleFactor` (output size
/// floor(input size * factor)), exactly one of them; `mode` "nearest" or
/// "bilinear"; `alignCorners` only with "bilinear" (false by default).
struct InterpolateOptions {
  std::optional<Size2> size{};
  std::optional<std::array<double, 2>> scaleFactor{};
  std::string mode = "nearest";
  std::optional<bool> alignCorners{};
};

/// x [N, C, H, W] resized as torch.nn.functional.interpolate: "nearest"
/// takes source index floor(dst * scale) (clamped), "bilinear" weighs the
/// two neighbours of PyTorch's source coordinate (align_corners or half
/// pixel, negative clamped to 0). A given scaleFactor sets the scale
/// (1 / factor), as PyTorch's recompute_scale_factor=None does. Built on
/// indexSelect, so x gets gradients.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace kiln
