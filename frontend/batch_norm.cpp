// batchNorm and groupNorm (frontend/normalization.h), compositions of
// registry ops. Training-mode batch norm computes under no grad and attaches
// PyTorch's batch_norm backward, the layer norm formula over the reduced
// dims (shorter and better conditioned than the chain rule through each
// step):
//   gx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * weight,
//   gweight = sum(g * xhat), gbias = sum(g) over every dim but the channel's.
// Eval-mode batch norm is an affine map per channel and differentiates
// through its ops; groupNorm is layerNorm (and its gradient) on x viewed as
// [N, G, rest], then the per-channel affine map.
#include <fmt/format.h>

#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/normalization.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln {

namespace {

using detail::floatComputeInput;

/// [1, C, 1, ...]: a per-channel tensor's shape broadcast against x.
Shape channelShape(const Tensor& x) {
  Shape s(static_cast<size_t>(x.dim()), 1);
  s[1] = x.size(1);
  return s;
}

/// Checks that each named per-channel tensor is undefined or [C].
void checkPerChannel(const char* op, const Tensor& x, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  for (const auto& [name, t] : ts)
    KILN_CHECK(!t->defined() || t->shape() == Shape{x.size(1)},
               "{}: expected {} of shape [{}] (the channels of {}), got {}", op, name, x.size(1), x.str(), t->str());
}

}  // namespace

Tensor batchNorm(const Tensor& x, const Tensor& runningMean, const Tensor& runningVar, const Tensor& weight,
                 const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  KILN_CHECK(x.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(x.dim() >= 2, "{}: expected an input of at least 2 dims [N, C, *], got {}", op, x.str());
  checkPerChannel(op, x,
                  {{"running_mean", &runningMean}, {"running_var", &runningVar}, {"weight", &weight}, {"bias", &bias}});
  const Shape cs = channelShape(x);
  const int64_t c = x.size(1);
  std::vector<int64_t> dims{0};
  for (int d = 2; d < x.dim(); ++d) dims.push_back(d);
  if (!training) {
    KILN_CHECK(runningMean.defined() && runningVar.defined(),
               "{}: running_mean and running_var must be defined in evaluation mode", op);
    const Tensor xf = floatComputeInput(op, x);
    Tensor y = (xf - runningMean.view(cs)) * rsqrt(runningVar.view(cs) + eps);
    if (weight.defined()) y = y * weight.view(cs);
    if (bias.defined()) y = y + bias.view(cs);
    return y.to(x.dtype());
  }
  const int64_t count = c > 0 ? x.numel() / c : 0;
  KILN_CHECK(count > 1, "{}: expected more than 1 value per channel when training, got input {}", op, x.str());
  Tensor mu, rstd, y;
  const Tensor xf = [&] {
    NoGradGuard noGrad;
    return floatComputeInput(op, x);
  }();
  {
    NoGradGuard noGrad;
    mu = mean(xf, dims, true);
    const Tensor centered = xf - mu;
    const Tensor var = mean(centered * centered, dims, true);
    rstd = 1.0 / sqrt(var + eps);
    y = centered * rstd;
    if (weight.defined()) y = y * weight.view(cs);
    if (bias.defined()) y = y + bias.view(cs);
    y = y.to(x.dtype());
    // The running statistics, with the unbiased variance, as PyTorch.
    const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    if (runningMean.defined()) runningMean.copy_(runningMean * (1.0 - momentum) + mu.view({c}) * momentum);
    if (runningVar.defined()) runningVar.copy_(runningVar * (1.0 - momentum) + var.view({c}) * (momentum * unbias));
  }
  const std::vector<Tensor> inputs{x, weight, bias};
  autograd::attach(
      "NativeBatchNormBackward", inputs, std::span<const Tensor>(&y, 1),
      [sx = autograd::SavedTensor(xf), smu = autograd::SavedTensor(mu), srstd = autograd::SavedTensor(rstd),
       sw = weight.defined() ? autograd::SavedTensor(weight) : autograd::SavedTensor(), hasBias = bias.defined(), dims,
       cs, c](const std::vector<Tensor>& grads) {
        const char* node = "NativeBatchNormBackward";
        const Tensor r = srstd.unpack(node);
        const Tensor xhat = (sx.unpack(node) - smu.unpack(node)) * r;
        const Tensor g = floatComputeInput("batch_norm", grads.at(0));
        const Tensor gw = sw.defined() ? g * sw.unpack(node).view(cs) : g;
        const Tensor gx = r * (gw - mean(gw, dims, true) - xhat * mean(gw * xhat, dims, true));
        return std::vector<Tensor>{gx, sw.defined() ? sum(g * xhat, dims).view({c}) : Tensor(),
                                   hasBias ? sum(g, dims).view({c}) : Tensor()};
      });
  return y;
}

Tensor groupNorm(const Tensor& x, int64_t numGroups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "group_norm";
  KILN_CHECK(x.defined(), "{}: argument 0 is an undefined tensor", op);
  KILN_CHECK(x.dim() >= 2, "{}: expected an input of at least 2 dims [N, C, *], got {}", op, x.str());
  KILN_CHECK(numGroups > 0 && x.size(1) % numGroups == 0,
             "{}: expected the channels of {} to be divisible by num_groups, got num_groups={}", op, x.str(),
             numGroups);
  checkPerChannel(op, x, {{"weight", &weight}, {"bias", &bias}});
  const int64_t n = x.size(0), rest = n > 0 ? x.numel() / (n * numGroups) : 0;
  KILN_CHECK(rest > 0, "{}: expected a non-empty group, got input {}", op, x.str());
  const Tensor xf = floatComputeInput(op, x);
  Tensor y = layerNorm(xf.reshape({n, numGroups, rest}), {rest}, {}, {}, eps).reshape(x.shape());
  const Shape cs = channelShape(x);
  if (weight.defined()) y = y * weight.view(cs);
  if (bias.defined()) y = y + bias.view(cs);
  return y.to(x.dtype());
}

}  // namespace kiln
