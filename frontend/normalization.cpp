// softmax, logSoftmax and layerNorm (frontend/reductions.h): compositions of
// registry ops, so that they trace into graphs the fusion passes can see.
// f16 and bf16 inputs are computed in f32 and the results rounded, as
// PyTorch's kernels accumulate in float. Each computes without recording
// its steps and attaches its own gradient, PyTorch's formula (shorter and
// better conditioned than the chain rule through every step):
//   softmax:     gx = y * (g - sum(g * y))
//   log_softmax: gx = g - exp(y) * sum(g)
//   layer_norm:  gx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * weight,
//                gweight = sum(g * xhat), gbias = sum(g) over the leading dims.
#include "frontend/normalization.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/amp/autocast_policy.h"
#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln {

namespace detail {
Tensor floatComputeInput(const char* op, const Tensor& x) {
  KILN_CHECK(x.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(isFloatingPoint(x.dtype()), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}", op,
             x.str());
  return x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? x.to(DType::f32) : x;
}
}  // namespace detail

namespace {
using detail::floatComputeInput;
}  // namespace

Tensor softmax(const Tensor& x0, int64_t dim) {
  const Tensor x = detail::autocastArg("softmax", x0);
  const int d = ir::normalizeDim("softmax", dim, x.type());
  Tensor y;
  {
    NoGradGuard noGrad;
    const Tensor xf = floatComputeInput("softmax", x);
    if (x.dim() > 0 && x.size(d) == 0) return zeros(x.shape(), x.dtype(), x.device());  // no row to normalize
    const Tensor e = exp(xf - amax(xf, {d}, true));
    y = (e / sum(e, {d}, true)).to(x.dtype());
  }
  autograd::attach("SoftmaxBackward", std::span<const Tensor>(&x, 1), std::span<const Tensor>(&y, 1),
                   [saved = autograd::SavedTensor(y), d](const std::vector<Tensor>& grads) {
                     const Tensor yf = floatComputeInput("softmax", saved.unpack("SoftmaxBackward"));
                     const Tensor g = floatComputeInput("softmax", grads.at(0));
                     return std::vector<Tensor>{yf * (g - sum(g * yf, {d}, true))};
                   });
  return y;
}

Tensor logSoftmax(const Tensor& x0, int64_t dim) {
  const Tensor x = detail::autocastArg("log_softmax", x0);
  const int d = ir::normalizeDim("log_softmax", dim, x.type());
  Tensor y;
  {
    NoGradGuard noGrad;
    const Tensor xf = floatComputeInput("log_softmax", x);
    if (x.dim() > 0 && x.size(d) == 0) return zeros(x.shape(), x.dtype(), x.device());
    const Tensor shifted = xf - amax(xf, {d}, true);
    y = (shifted - log(sum(exp(shifted), {d}, true))).to(x.dtype());
  }
  autograd::attach("LogSoftmaxBackward", std::span<const Tensor>(&x, 1), std::span<const Tensor>(&y, 1),
                   [saved = autograd::SavedTensor(y), d](const std::vector<Tensor>& grads) {
                     const Tensor yf = floatComputeInput("log_softmax", saved.unpack("LogSoftmaxBackward"));
                     const Tensor g = floatComputeInput("log_softmax", grads.at(0));
                     return std::vector<Tensor>{g - exp(yf) * sum(g, {d}, true)};
                   });
  return y;
}

LayerNormResult layerNormWithStats(const Tensor& x0, const Shape& normalizedShape, const Tensor& weight0,
                                   const Tensor& bias0, double eps) {
  const Tensor x = detail::autocastArg("layer_norm", x0), weight = detail::autocastArg("layer_norm", weight0),
               bias = detail::autocastArg("layer_norm", bias0);
  const Tensor xf = [&] {
    NoGradGuard noGrad;
    return floatComputeInput("layer_norm", x);
  }();
  const int k = static_cast<int>(normalizedShape.size());
  KILN_CHECK(k > 0, "layer_norm: expected a non-empty normalized_shape, got []");
  bool matches = k <= x.dim();
  for (int i = 0; matches && i < k; ++i) matches = x.shape()[x.dim() - k + i] == normalizedShape[i];
  KILN_CHECK(matches, "layer_norm: normalized_shape {} does not match the last dims of {}",
             ir::shapeStr(normalizedShape), x.str());
  for (const auto& [name, t] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}})
    KILN_CHECK(!t->defined() || t->shape() == normalizedShape, "layer_norm: expected {} of shape {}, got {}", name,
               ir::shapeStr(normalizedShape), t->str());
  std::vector<int64_t> dims;
  for (int i = -k; i < 0; ++i) dims.push_back(i);
  Tensor mu, rstd, y;
  {
    NoGradGuard noGrad;
    // Two passes: the mean, then the mean of the squared deviations from it.
    mu = mean(xf, dims, true);
    const Tensor centered = xf - mu;
    rstd = 1.0 / sqrt(mean(centered * centered, dims, true) + eps);
    y = centered * rstd;
    if (weight.defined()) y = y * weight;
    if (bias.defined()) y = y + bias;
    y = y.to(x.dtype());
  }
  const std::vector<Tensor> inputs{x, weight, bias};
  autograd::attach(
      "LayerNormBackward", inputs, std::span<const Tensor>(&y, 1),
      [sx = autograd::SavedTensor(xf), smu = autograd::SavedTensor(mu), srstd = autograd::SavedTensor(rstd),
       sw = weight.defined() ? autograd::SavedTensor(weight) : autograd::SavedTensor(), hasBias = bias.defined(),
       dims](const std::vector<Tensor>& grads) {
        const char* node = "LayerNormBackward";
        const Tensor r = srstd.unpack(node);
        const Tensor xhat = (sx.unpack(node) - smu.unpack(node)) * r;
        const Tensor g = floatComputeInput("layer_norm", grads.at(0));
        const Tensor gw = sw.defined() ? g * sw.unpack(node) : g;
        const Tensor gx = r * (gw - mean(gw, dims, true) - xhat * mean(gw * xhat, dims, true));
        return std::vector<Tensor>{gx, sw.defined() ? g * xhat : Tensor(), hasBias ? g : Tensor()};
      });
  return {y, mu.to(x.dtype()), rstd.to(x.dtype())};
}

Tensor layerNorm(const Tensor& x, const Shape& normalizedShape, const Tensor& weight, const Tensor& bias, double eps) {
  return layerNormWithStats(x, normalizedShape, weight, bias, eps).output;
}

}  // namespace kiln
