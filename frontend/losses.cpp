// Loss functions (frontend/losses.h).
#include "frontend/losses.h"

#include <fmt/format.h>

#include "frontend/amp/autocast_policy.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln {

namespace {

Tensor reduce(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::none: return losses;
    case Reduction::mean: return mean(losses);
    case Reduction::sum: return sum(losses);
  }
  return losses;
}

/// The dim that holds the classes: 1, or 0 for an input of one dim.
int64_t classDim(const Tensor& input) { return input.dim() >= 2 ? 1 : 0; }

/// A bool mask of input's shape, true where the class along classDim equals
/// the target (target has input's shape without classDim).
Tensor oneHot(const Tensor& input, const Tensor& target) {
  const int64_t cd = classDim(input);
  Shape classShape(static_cast<size_t>(input.dim()), 1);
  classShape[cd] = input.size(static_cast<int>(cd));
  const Tensor classes =
      arange(0.0, static_cast<double>(classShape[cd]), 1.0, target.dtype(), target.device()).reshape(classShape);
  return eq(target.unsqueeze(cd), classes);
}

void checkTarget(const char* op, const Tensor& input, const Tensor& target, int64_t ignoreIndex) {
  KILN_CHECK(input.defined() && target.defined(), "{}: undefined input or target", op);
  KILN_CHECK(isFloatingPoint(input.dtype()), "{}: expected floating-point input, got {}", op, input.str());
  KILN_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
             "{}: expected class indices of dtype i64 or i32 as target, got {}", op, target.str());
  KILN_CHECK(input.dim() >= 1, "{}: expected input with at least one dim (classes), got {}", op, input.str());
  Shape want = input.shape();
  want.erase(want.begin() + classDim(input));
  KILN_CHECK(target.shape() == want, "{}: expected target of shape {} for input {}, got {}", op, ir::shapeStr(want),
             input.str(), target.str());
  KILN_CHECK(input.device() == target.device(), "{}: input {} and target {} are on different devices", op, input.str(),
             target.str());
  if (target.isTraced() || target.numel() == 0) return;  // values unknown while tracing
  const int64_t classes = input.size(static_cast<int>(classDim(input)));
  const std::vector<int64_t> t = target.to(DType::i64).toVector<int64_t>();
  for (size_t i = 0; i < t.size(); ++i)
    KILN_CHECK(t[i] == ignoreIndex || (t[i] >= 0 && t[i] < classes),
               "{}: target {} at index {} is out of bounds for {} classes (input {})", op, t[i], i, classes,
               input.str());
}

}  // namespace

Tensor mseLoss(const Tensor& input0, const Tensor& target0, Reduction reduction) {
  const Tensor input = detail::autocastArg("mse_loss", input0), target = detail::autocastArg("mse_loss", target0);
  KILN_CHECK(input.defined() && target.defined(), "mse_loss: undefined input or target");
  const Tensor d = input - target;
  return reduce(d * d, reduction);
}

Tensor nllLoss(const Tensor& input0, const Tensor& target0, const NllOptions& options) {
  const Tensor input = detail::autocastArg("nll_loss", input0), target = detail::autocastArg("nll_loss", target0);
  checkTarget("nll_loss", input, target, options.ignoreIndex);
  const int64_t cd = classDim(input);
  const int64_t classes = input.size(static_cast<int>(cd));
  if (options.weight.defined())
    KILN_CHECK(options.weight.shape() == Shape{classes},
               "nll_loss: expected weight of shape [{}] (one per class) for input {}, got {}", classes, input.str(),
               options.weight.str());
  const Tensor hot = oneHot(input, target);
  const Tensor picked = sum(where(hot, input, 0.0), {cd});  // input[i, t_i]; 0 for ignored targets
  const Tensor valid = ne(target, options.ignoreIndex);
  Tensor w;  // weight of each element's target, 0 where ignored
  if (options.weight.defined()) {
    Shape classShape(static_cast<size_t>(input.dim()), 1);
    classShape[cd] = classes;
    w = where(valid, sum(where(hot, options.weight.reshape(classShape), 0.0), {cd}), 0.0);
  } else {
    w = where(valid, 1.0, 0.0).to(input.dtype());
  }
  const Tensor losses = neg(picked * w);
  if (options.reduction == Reduction::mean) return sum(losses) / sum(w);
  return reduce(losses, options.reduction);
}

Tensor crossEntropy(const Tensor& input0, const Tensor& target0, const CrossEntropyOptions& options) {
  const Tensor input = detail::autocastArg("cross_entropy", input0),
               target = detail::autocastArg("cross_entropy", target0);
  KILN_CHECK(input.defined() && target.defined(), "cross_entropy: undefined input or target");
  KILN_CHECK(options.labelSmoothing >= 0.0 && options.labelSmoothing <= 1.0,
             "cross_entropy: label_smoothing must be in [0, 1], got {}", options.labelSmoothing);
  const int64_t cd = classDim(input);
  KILN_CHECK(isFloatingPoint(input.dtype()), "cross_entropy: expected floating-point input, got {}", input.str());
  const Tensor logp = logSoftmax(input, cd);
  if (isFloatingPoint(target.dtype())) {
    KILN_CHECK(target.shape() == input.shape(),
               "cross_entropy: class probabilities as target must have the input's shape {}, got {}", input.str(),
               target.str());
    KILN_CHECK(!options.weight.defined() && options.labelSmoothing == 0.0,
               "cross_entropy: weight and label_smoothing are not supported with class-probability targets yet");
    return reduce(neg(sum(logp * target, {cd})), options.reduction);
  }
  KILN_CHECK(options.labelSmoothing == 0.0 || !options.weight.defined(),
             "cross_entropy: label_smoothing together with weight is not supported yet");
  const Tensor nll = nllLoss(logp, target, {options.weight, options.ignoreIndex, options.reduction});
  if (options.labelSmoothing == 0.0) return nll;
  // PyTorch: (1 - eps) * nll + eps * smooth, smooth = -sum(logp) / C per
  // element (0 where ignored), reduced like nll (mean over the non-ignored).
  const double eps = options.labelSmoothing;
  const int64_t classes = input.size(static_cast<int>(cd));
  const Tensor valid = ne(target, options.ignoreIndex);
  const Tensor smooth = where(valid, neg(sum(logp, {cd})) / static_cast<double>(classes), 0.0);
  Tensor smoothed;
  if (options.reduction == Reduction::mean)
    smoothed = sum(smooth) / sum(valid.to(input.dtype()));
  else
    smoothed = reduce(smooth, options.reduction);
  return nll * (1.0 - eps) + smoothed * eps;
}

}  // namespace kiln
