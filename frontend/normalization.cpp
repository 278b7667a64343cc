// softmax, logSoftmax and layerNorm (frontend/reductions.h): compositions of
// registry ops, so that they trace into graphs the fusion passes can see.
// f16 and bf16 inputs are computed in f32 and the results rounded, as
// PyTorch's kernels accumulate in float.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln {

namespace {
/// x in the dtype the op computes in (f32 for f16 and bf16), after checking
/// that it is a floating-point tensor.
Tensor computeInput(const char* op, const Tensor& x) {
  KILN_CHECK(x.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(isFloatingPoint(x.dtype()), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}", op,
             x.str());
  return x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? x.to(DType::f32) : x;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  const Tensor xf = computeInput("softmax", x);
  const int d = ir::normalizeDim("softmax", dim, x.type());
  if (x.dim() > 0 && x.size(d) == 0) return zeros(x.shape(), x.dtype(), x.device());  // no row to normalize
  const Tensor e = exp(xf - amax(xf, {d}, true));
  return (e / sum(e, {d}, true)).to(x.dtype());
}

Tensor logSoftmax(const Tensor& x, int64_t dim) {
  const Tensor xf = computeInput("log_softmax", x);
  const int d = ir::normalizeDim("log_softmax", dim, x.type());
  if (x.dim() > 0 && x.size(d) == 0) return zeros(x.shape(), x.dtype(), x.device());
  const Tensor shifted = xf - amax(xf, {d}, true);
  return (shifted - log(sum(exp(shifted), {d}, true))).to(x.dtype());
}

LayerNormResult layerNormWithStats(const Tensor& x, const Shape& normalizedShape, const Tensor& weight,
                                   const Tensor& bias, double eps) {
  const Tensor xf = computeInput("layer_norm", x);
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
  // Two passes: the mean, then the mean of the squared deviations from it.
  const Tensor mu = mean(xf, dims, true);
  const Tensor centered = xf - mu;
  const Tensor rstd = 1.0 / sqrt(mean(centered * centered, dims, true) + eps);
  Tensor y = centered * rstd;
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return {y.to(x.dtype()), mu.to(x.dtype()), rstd.to(x.dtype())};
}

Tensor layerNorm(const Tensor& x, const Shape& normalizedShape, const Tensor& weight, const Tensor& bias, double eps) {
  return layerNormWithStats(x, normalizedShape, weight, bias, eps).output;
}

}  // namespace kiln
