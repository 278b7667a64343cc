// pad, maxPool2d, avgPool2d, adaptiveAvgPool2d and interpolate
// (frontend/pooling.h): compositions of registry ops, no kernels of their
// own (docs/convolution.md, "Pooling, normalization, padding and
// resizing").
//
// A 2-d pool pads its input once (-inf or 0, a cat), then reads the k*k
// strided slice views xp[:, :, i*dh :: sh, j*dw :: sw], one per window
// element, each [N, C, OH, OW], and folds them with maximum (or add, then a
// divide by the host-computed divisors): elementwise ops over views, which
// fuse into one kernel. Every index table (window positions, source rows,
// weights) is computed on the host from the shapes, with PyTorch's integer
// and floating-point formulas, and enters as a small constant tensor.
//
// Max pool's gradient is attached by hand: the maximum chain's own gradient
// splits among ties, while PyTorch's max_pool2d backward scatters the whole
// gradient to the one element its index names (the first maximum in window
// order, or the last NaN). The indices are a where-chain over the same k*k
// views, recomputed from the saved input in backward (so the forward is the
// one kernel), and the scatter is one indexAdd into the flattened input.
// avgPool2d, pad and interpolate differentiate through their ops.
#include "frontend/pooling.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/indexing.h"
#include "frontend/normalization.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln {

namespace {

using detail::floatComputeInput;

/// A 1-d i64 tensor on `device`.
Tensor indexTensor(const std::vector<int64_t>& values, Device device) { return fromVector(values, device); }

/// floor(a / b) for b > 0.
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// Sizes and offsets of one 2-d pool, checked, with PyTorch's output sizes
/// (pooling_output_shape).
struct PoolGeometry {
  int64_t n, c, h, w;
  Size2 kernel, stride, padding, dilation;
  int64_t oh, ow;

  /// Rows (cols) of the padded input the windows read: top padding first.
  int64_t paddedExtent(int d) const { return ((d == 0 ? oh : ow) - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1; }
};

int64_t pooledSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceilMode) {
  int64_t out = floorDiv(in + 2 * p - d * (k - 1) - 1 + (ceilMode ? s - 1 : 0), s) + 1;
  // The last window must start inside the input or its left padding.
  if (ceilMode && (out - 1) * s >= in + p) --out;
  return out;
}

/// x as [N, C, H, W] (an unbatched [C, H, W] gets N = 1) after the checks
/// PyTorch's pool2d_shape_check makes.
PoolGeometry poolGeometry(const char* op, const Tensor& x, Size2 kernel, std::optional<Size2> stride0, Size2 padding,
                          Size2 dilation, bool ceilMode) {
  KILN_CHECK(x.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, "{}: expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got {}", op,
             x.str());
  const Size2 stride = stride0 ? *stride0 : kernel;
  KILN_CHECK(kernel[0] > 0 && kernel[1] > 0, "{}: expected kernel sizes > 0, got {}", op, kernel);
  KILN_CHECK(stride[0] > 0 && stride[1] > 0, "{}: expected strides > 0, got {}", op, stride);
  KILN_CHECK(dilation[0] > 0 && dilation[1] > 0, "{}: expected dilations > 0, got {}", op, dilation);
  KILN_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2,
             "{}: padding should be at most half of the kernel size, got padding {} for kernel {}", op, padding,
             kernel);
  PoolGeometry g;
  const int b = x.dim() == 4 ? 1 : 0;
  g.n = b ? x.size(0) : 1;
  g.c = x.size(b), g.h = x.size(b + 1), g.w = x.size(b + 2);
  KILN_CHECK(g.c > 0 && g.h > 0 && g.w > 0, "{}: expected non-empty channels, height and width, got {}", op, x.str());
  g.kernel = kernel, g.stride = stride, g.padding = padding, g.dilation = dilation;
  g.oh = pooledSize(g.h, kernel[0], stride[0], padding[0], dilation[0], ceilMode);
  g.ow = pooledSize(g.w, kernel[1], stride[1], padding[1], dilation[1], ceilMode);
  KILN_CHECK(g.oh > 0 && g.ow > 0, "{}: the output size [{}, {}] computed for {} is too small", op, g.oh, g.ow,
             x.str());
  return g;
}

/// x [N, C, H, W] padded with `value` so that every window of `g` lies in it.
Tensor padForPool(const Tensor& x, const PoolGeometry& g, double value) {
  const int64_t bottom = std::max<int64_t>(0, g.paddedExtent(0) - g.h - g.padding[0]);
  const int64_t right = std::max<int64_t>(0, g.paddedExtent(1) - g.w - g.padding[1]);
  if (g.padding[0] == 0 && g.padding[1] == 0 && bottom == 0 && right == 0) return x;
  return pad(x, {g.padding[1], right, g.padding[0], bottom}, "constant", value);
}

/// Window element (i, j) of every output position: a strided view [N, C, OH, OW] of the padded input.
Tensor windowElement(const Tensor& xp, const PoolGeometry& g, int64_t i, int64_t j) {
  const int64_t r = i * g.dilation[0], c = j * g.dilation[1];
  return xp.slice(2, r, r + (g.oh - 1) * g.stride[0] + 1, g.stride[0])
      .slice(3, c, c + (g.ow - 1) * g.stride[1] + 1, g.stride[1]);
}

/// The maxima of the windows of x [N, C, H, W]: a maximum chain (NaN wins).
Tensor maxPoolValues(const Tensor& x, const PoolGeometry& g) {
  const Tensor xp = padForPool(x, g, -std::numeric_limits<double>::infinity());
  Tensor best = windowElement(xp, g, 0, 0);
  for (int64_t i = 0; i < g.kernel[0]; ++i)
    for (int64_t j = 0; j < g.kernel[1]; ++j)
      if (i || j) best = maximum(best, windowElement(xp, g, i, j));
  return best;
}

/// PyTorch's max pool indices (i64 [N, C, OH, OW], h * W + w): walking each
/// window in order from its first element inside the input, an element
/// replaces the best so far if it is greater or NaN.
Tensor maxPoolIndices(const Tensor& x, const PoolGeometry& g) {
  const Tensor xp = padForPool(x, g, -std::numeric_limits<double>::infinity());
  const int64_t positions = g.oh * g.ow;
  std::vector<int64_t> first(static_cast<size_t>(positions));
  for (int64_t oh = 0; oh < g.oh; ++oh)
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      int64_t h0 = oh * g.stride[0] - g.padding[0], w0 = ow * g.stride[1] - g.padding[1];
      while (h0 < 0) h0 += g.dilation[0];
      while (w0 < 0) w0 += g.dilation[1];
      first[static_cast<size_t>(oh * g.ow + ow)] = h0 * g.w + w0;
    }
  Tensor index = indexTensor(first, x.device()).view({g.oh, g.ow}).expand({g.n, g.c, g.oh, g.ow});
  Tensor best = full({1}, -std::numeric_limits<double>::infinity(), x.dtype(), x.device());
  std::vector<int64_t> candidate(static_cast<size_t>(positions));
  for (int64_t i = 0; i < g.kernel[0]; ++i)
    for (int64_t j = 0; j < g.kernel[1]; ++j) {
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow)
          candidate[static_cast<size_t>(oh * g.ow + ow)] = (oh * g.stride[0] - g.padding[0] + i * g.dilation[0]) * g.w +
                                                           (ow * g.stride[1] - g.padding[1] + j * g.dilation[1]);
      const Tensor v = windowElement(xp, g, i, j);
      const Tensor take = maximum(gt(v, best), ne(v, v));  // bool maximum: or
      best = where(take, v, best);
      index = where(take, indexTensor(candidate, x.device()).view({g.oh, g.ow}), index);
    }
  return index;
}

/// The gradient of x [N, C, H, W] from that of its pool `grad` [N, C, OH,
/// OW]: each element added at the input element `indices` names.
Tensor scatterToIndices(const Tensor& grad, const Tensor& indices, const PoolGeometry& g) {
  const int64_t plane = g.h * g.w;
  const Tensor base =
      (arange(0, static_cast<double>(g.n * g.c), 1, DType::i64, grad.device()) * plane).view({g.n, g.c, 1, 1});
  const Tensor flat = (indices + base).reshape({-1});
  return indexAdd(zeros({g.n * g.c * plane}, grad.dtype(), grad.device()), 0, flat, grad.reshape({-1}))
      .view({g.n, g.c, g.h, g.w});
}

/// Runs `fn` on x as [N, C, H, W] and gives its results x's batching back.
template <typename Fn>
auto batched(const Tensor& x, Fn fn) {
  if (x.dim() == 4) return fn(x);
  auto result = fn(x.unsqueeze(0));
  if constexpr (std::is_same_v<decltype(result), MaxPoolResult>)
    return MaxPoolResult{result.values.squeeze(0), result.indices.defined() ? result.indices.squeeze(0) : Tensor()};
  else
    return result.squeeze(0);
}

MaxPoolResult maxPool(const char* op, const Tensor& x0, Size2 kernel, std::optional<Size2> stride, Size2 padding,
                      Size2 dilation, bool ceilMode, bool withIndices) {
  const PoolGeometry g = poolGeometry(op, x0, kernel, stride, padding, dilation, ceilMode);
  KILN_CHECK(isFloatingPoint(x0.dtype()), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}", op,
             x0.str());
  return batched(x0, [&](const Tensor& x) {
    MaxPoolResult r;
    {
      NoGradGuard noGrad;
      r.values = maxPoolValues(x, g);
      if (withIndices) r.indices = maxPoolIndices(x, g);
    }
    autograd::attach(
        "MaxPool2DWithIndicesBackward", std::span<const Tensor>(&x, 1), std::span<const Tensor>(&r.values, 1),
        [sx = autograd::SavedTensor(x), si = withIndices ? autograd::SavedTensor(r.indices) : autograd::SavedTensor(),
         g](const std::vector<Tensor>& grads) {
          const char* node = "MaxPool2DWithIndicesBackward";
          Tensor indices;
          if (si.defined()) {
            indices = si.unpack(node);
          } else {
            NoGradGuard noGrad;
            indices = maxPoolIndices(sx.unpack(node), g);
          }
          return std::vector<Tensor>{scatterToIndices(grads.at(0), indices, g)};
        });
    return r;
  });
}

}  // namespace

Tensor maxPool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                 bool ceilMode) {
  return maxPool("max_pool2d", x, kernel, stride, padding, dilation, ceilMode, false).values;
}

MaxPoolResult maxPool2dWithIndices(const Tensor& x, Size2 kernel, std::optional<Size2> stride, Size2 padding,
                                   Size2 dilation, bool ceilMode) {
  return maxPool("max_pool2d_with_indices", x, kernel, stride, padding, dilation, ceilMode, true);
}

Tensor avgPool2d(const Tensor& x0, Size2 kernel, std::optional<Size2> stride, Size2 padding, bool ceilMode,
                 bool countIncludePad, std::optional<int64_t> divisorOverride) {
  const char* op = "avg_pool2d";
  const PoolGeometry g = poolGeometry(op, x0, kernel, stride, padding, {1, 1}, ceilMode);
  KILN_CHECK(!divisorOverride || *divisorOverride != 0, "{}: divisor must be not zero", op);
  const Tensor xf = floatComputeInput(op, x0);
  // PyTorch's divisor of each window (avg_pool2d's kernel): the window
  // clipped to the padded input, then to the input; an empty one gives 0.
  std::vector<double> divisor(static_cast<size_t>(g.oh * g.ow));
  for (int64_t oh = 0; oh < g.oh; ++oh)
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      int64_t h0 = oh * g.stride[0] - g.padding[0], w0 = ow * g.stride[1] - g.padding[1];
      int64_t h1 = std::min(h0 + g.kernel[0], g.h + g.padding[0]), w1 = std::min(w0 + g.kernel[1], g.w + g.padding[1]);
      const int64_t poolSize = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
      h1 = std::min(h1, g.h), w1 = std::min(w1, g.w);
      double d = static_cast<double>(divisorOverride   ? *divisorOverride
                                     : countIncludePad ? poolSize
                                                       : (h1 - h0) * (w1 - w0));
      if (h0 >= h1 || w0 >= w1) d = 1;  // the sum is 0 there
      divisor[static_cast<size_t>(oh * g.ow + ow)] = d;
    }
  // Made in the dtype of the sum (no cast in the program: it would be a kernel of its own).
  const Tensor divisors = xf.dtype() == DType::f64 ? fromVector(divisor, {g.oh, g.ow}, xf.device())
                                                   : fromVector(std::vector<float>(divisor.begin(), divisor.end()),
                                                                {g.oh, g.ow}, xf.device());
  return batched(xf,
                 [&](const Tensor& x) {
                   const Tensor xp = padForPool(x, g, 0.0);
                   Tensor total = windowElement(xp, g, 0, 0);
                   for (int64_t i = 0; i < g.kernel[0]; ++i)
                     for (int64_t j = 0; j < g.kernel[1]; ++j)
                       if (i || j) total = total + windowElement(xp, g, i, j);
                   return total / divisors;
                 })
      .to(x0.dtype());
}

Tensor adaptiveAvgPool2d(const Tensor& x0, Size2 outputSize) {
  const char* op = "adaptive_avg_pool2d";
  KILN_CHECK(x0.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(x0.dim() == 3 || x0.dim() == 4, "{}: expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got {}", op,
             x0.str());
  KILN_CHECK(outputSize[0] > 0 && outputSize[1] > 0, "{}: expected an output size > 0, got {}", op, outputSize);
  const int64_t h = x0.size(-2), w = x0.size(-1);
  KILN_CHECK(h > 0 && w > 0 && x0.size(-3) > 0, "{}: expected non-empty channels, height and width, got {}", op,
             x0.str());
  const auto [oh, ow] = outputSize;
  if (oh == 1 && ow == 1) return mean(floatComputeInput(op, x0), {-2, -1}, true).to(x0.dtype());
  if (h % oh == 0 && w % ow == 0) return avgPool2d(x0, {h / oh, w / ow});
  const Tensor x = floatComputeInput(op, x0);
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < oh; ++i) {
    const int64_t h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh;
    std::vector<Tensor> cols;
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
      cols.push_back(mean(x.slice(-2, h0, h1).slice(-1, w0, w1), {-2, -1}, true));
    }
    rows.push_back(cat(cols, -1));
  }
  return cat(rows, -2).to(x0.dtype());
}

}  // namespace kiln
