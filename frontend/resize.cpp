// pad and interpolate (frontend/pooling.h): index tables computed on the
// host with PyTorch's formulas, applied with registry ops. Constant padding
// is a crop (slice) and a cat with filled blocks; reflect, replicate and
// circular padding are one indexSelect per padded dim, whose table maps
// each output position to its source; nearest resizing is an indexSelect
// per spatial dim, bilinear two per dim and a weighted sum. All of them
// differentiate through those ops (indexSelect's gradient is indexAdd).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "frontend/indexing.h"
#include "frontend/ops.h"
#include "frontend/pooling.h"
#include "runtime/error.h"

namespace kiln {

namespace {

/// The source of output position j of a dim of size n padded by `before`
/// (non-constant modes; negative pads crop).
int64_t padSource(std::string_view mode, int64_t j, int64_t n, int64_t before) {
  int64_t s = j - before;
  if (mode == "reflect") {
    if (s < 0) s = -s;
    if (s >= n) s = 2 * (n - 1) - s;
    return s;
  }
  if (mode == "replicate") return std::clamp<int64_t>(s, 0, n - 1);
  return ((s % n) + n) % n;  // circular
}

Tensor constantPad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  Tensor y = x;
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const int64_t d = x.dim() - 1 - static_cast<int64_t>(k);
    const int64_t before = pads[2 * k], after = pads[2 * k + 1], n = y.size(static_cast<int>(d));
    KILN_CHECK(n + before + after >= 0,
               "pad: the input size {} plus padding {} and {} is negative, in dimension {} of {}", n, before, after, d,
               x.str());
    if (before < 0 || after < 0) y = y.slice(d, std::max<int64_t>(0, -before), n - std::max<int64_t>(0, -after));
    std::vector<Tensor> parts;
    Shape block = y.shape();
    if (before > 0) {
      block[d] = before;
      parts.push_back(full(block, value, y.dtype(), y.device()));
    }
    parts.push_back(y);
    if (after > 0) {
      block[d] = after;
      parts.push_back(full(block, value, y.dtype(), y.device()));
    }
    if (parts.size() > 1) y = cat(parts, d);
  }
  return y;
}

/// PyTorch's compute_scales_value: 1 / the given factor, else in / out.
template <typename T>
T scaleValue(std::optional<double> factor, int64_t in, int64_t out) {
  return factor && *factor > 0 ? static_cast<T>(1.0 / *factor) : static_cast<T>(in) / static_cast<T>(out);
}

/// The source rows of nearest resizing (PyTorch's nearest_idx, in float).
std::vector<int64_t> nearestSources(int64_t in, int64_t out, std::optional<double> factor) {
  std::vector<int64_t> src(static_cast<size_t>(out));
  const float scale = scaleValue<float>(factor, in, out);
  for (int64_t j = 0; j < out; ++j) {
    if (out == in)
      src[j] = j;
    else if (out == 2 * in)
      src[j] = j >> 1;
    else
      src[j] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(j) * scale)), in - 1);
  }
  return src;
}

/// Bilinear's two source rows and their weights per output row, in T (the
/// op's compute type), as PyTorch's compute_indices_weights_linear.
struct LinearTable {
  std::vector<int64_t> index0, index1;
  std::vector<double> lambda0, lambda1;
};

template <typename T>
LinearTable linearTable(int64_t in, int64_t out, std::optional<double> factor, bool alignCorners) {
  LinearTable t;
  const T scale = alignCorners ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                               : scaleValue<T>(factor, in, out);
  for (int64_t j = 0; j < out; ++j) {
    T src = alignCorners ? scale * static_cast<T>(j) : scale * (static_cast<T>(j) + T(0.5)) - T(0.5);
    if (!alignCorners && src < 0) src = 0;
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const T l1 = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
    t.index0.push_back(i0);
    t.index1.push_back(i0 + (i0 < in - 1 ? 1 : 0));
    t.lambda1.push_back(static_cast<double>(l1));
    t.lambda0.push_back(static_cast<double>(T(1) - l1));
  }
  return t;
}

/// x resized along `dim` by bilinear's table: x[i0] * l0 + x[i1] * l1.
Tensor linearAlong(const Tensor& x, int64_t dim, const LinearTable& t) {
  Shape weightShape(static_cast<size_t>(x.dim() - dim), 1);
  weightShape[0] = static_cast<int64_t>(t.index0.size());
  const Tensor l0 = fromVector(t.lambda0, weightShape, x.device()).to(x.dtype());
  const Tensor l1 = fromVector(t.lambda1, weightShape, x.device()).to(x.dtype());
  return indexSelect(x, dim, fromVector(t.index0, x.device())) * l0 +
         indexSelect(x, dim, fromVector(t.index1, x.device())) * l1;
}

}  // namespace

Tensor pad(const Tensor& x, std::vector<int64_t> pads, std::string_view mode, double value) {
  KILN_CHECK(x.defined(), "pad: argument 0 is an undefined tensor");
  KILN_CHECK(pads.size() % 2 == 0 && pads.size() / 2 <= static_cast<size_t>(x.dim()),
             "pad: expected an even number of pads, at most two per dimension, got {} for {}", pads, x.str());
  if (mode == "constant") return constantPad(x, pads, value);
  KILN_CHECK(mode == "reflect" || mode == "replicate" || mode == "circular",
             "pad: unknown mode '{}' (expected constant, reflect, replicate or circular)", mode);
  KILN_CHECK(value == 0, "pad: padding mode '{}' does not take a value, got {}", mode, value);
  const int64_t padded = static_cast<int64_t>(pads.size() / 2);
  KILN_CHECK(padded >= 1 && padded <= 3 && (x.dim() == padded + 1 || x.dim() == padded + 2),
             "pad: mode '{}' pads the last 1, 2 or 3 dims of a tensor with 1 or 2 more dims, got {} pads for {}", mode,
             pads.size(), x.str());
  Tensor y = x;
  for (int64_t k = 0; k < padded; ++k) {
    const int64_t d = x.dim() - 1 - k;
    const int64_t before = pads[2 * k], after = pads[2 * k + 1], n = x.size(static_cast<int>(d));
    const int64_t out = n + before + after;
    if (mode == "reflect")
      KILN_CHECK(before < n && after < n,
                 "pad: reflect padding must be smaller than the padded dimension, got {} and {} for dimension {} of {}",
                 before, after, d, x.str());
    else if (mode == "circular")
      KILN_CHECK(before <= n && after <= n,
                 "pad: circular padding of {} and {} wraps around dimension {} of {} more than once", before, after, d,
                 x.str());
    else
      KILN_CHECK(n > 0, "pad: replicate padding of an empty dimension {} of {}", d, x.str());
    KILN_CHECK(out >= 0, "pad: the input size {} plus padding {} and {} is negative, in dimension {} of {}", n, before,
               after, d, x.str());
    std::vector<int64_t> src(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) src[static_cast<size_t>(j)] = padSource(mode, j, n, before);
    y = indexSelect(y, d, fromVector(src, x.device()));
  }
  return y;
}

Tensor interpolate(const Tensor& x0, const InterpolateOptions& o) {
  const char* op = "interpolate";
  KILN_CHECK(x0.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(x0.dim() == 4, "{}: expected a 4-d [N, C, H, W] input, got {}", op, x0.str());
  KILN_CHECK(isFloatingPoint(x0.dtype()), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}", op,
             x0.str());
  KILN_CHECK(o.size.has_value() != o.scaleFactor.has_value(), "{}: expected either size or scaleFactor, not {}", op,
             o.size ? "both" : "neither");
  KILN_CHECK(o.mode == "nearest" || o.mode == "bilinear", "{}: unknown mode '{}' (expected nearest or bilinear)", op,
             o.mode);
  KILN_CHECK(!(o.mode == "nearest" && o.alignCorners),
             "{}: alignCorners can only be set with the interpolating modes (bilinear)", op);
  const Tensor x = x0.dtype() == DType::f16 || x0.dtype() == DType::bf16 ? x0.to(DType::f32) : x0;
  Size2 out;
  std::array<std::optional<double>, 2> factor;
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x.size(2 + d);
    if (o.scaleFactor) {
      const double f = (*o.scaleFactor)[static_cast<size_t>(d)];
      KILN_CHECK(f > 0 && std::isfinite(f), "{}: expected scale factors > 0, got {}", op, *o.scaleFactor);
      factor[static_cast<size_t>(d)] = f;
      out[static_cast<size_t>(d)] = static_cast<int64_t>(std::floor(static_cast<double>(in) * f));
    } else {
      out[static_cast<size_t>(d)] = (*o.size)[static_cast<size_t>(d)];
    }
    KILN_CHECK(in > 0 && out[static_cast<size_t>(d)] > 0,
               "{}: input and output sizes should be greater than 0, got input {} and output size {}", op, x.str(),
               out);
  }
  Tensor y = x;
  // Width first, then height: PyTorch's order of the weighted sums.
  for (int d = 1; d >= 0; --d) {
    const int64_t in = x.size(2 + d), n = out[static_cast<size_t>(d)];
    const std::optional<double> f = factor[static_cast<size_t>(d)];
    if (o.mode == "nearest") {
      y = indexSelect(y, 2 + d, fromVector(nearestSources(in, n, f), x.device()));
    } else {
      const bool align = o.alignCorners.value_or(false);
      y = linearAlong(
          y, 2 + d,
          x.dtype() == DType::f64 ? linearTable<double>(in, n, f, align) : linearTable<float>(in, n, f, align));
    }
  }
  return y.to(x0.dtype());
}

}  // namespace kiln
