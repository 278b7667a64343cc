// nn::utils::clipGradNorm_ (frontend/nn/clip_grad.h), as
// torch/nn/utils/clip_grad.py: per-gradient norms, the norm of those, one
// clamped coefficient multiplied into every gradient.
#include "frontend/nn/clip_grad.h"

#include <cmath>
#include <limits>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "runtime/error.h"

namespace kiln::nn::utils {

Tensor clipGradNorm_(const std::vector<Tensor>& parameters, double maxNorm, double normType, bool errorIfNonfinite) {
  KILN_CHECK(normType > 0 && !std::isnan(normType), "clipGradNorm_: normType must be positive or infinity, got {}",
             normType);
  KILN_CHECK(maxNorm >= 0 && !std::isnan(maxNorm), "clipGradNorm_: maxNorm must be >= 0, got {}", maxNorm);
  NoGradGuard noGrad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  const bool inf = std::isinf(normType);
  // Each gradient's norm, then the norm of those norms (PyTorch's
  // vector_norm of the stacked per-tensor norms).
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    const Tensor a = abs(g.dtype() == DType::f64 ? g : g.to(DType::f32));
    norms.push_back(inf ? amax(a) : pow(sum(pow(a, normType)), 1.0 / normType));
  }
  const Tensor all = stack(norms, 0);
  const Tensor total = inf ? amax(all) : pow(sum(pow(all, normType)), 1.0 / normType);
  if (errorIfNonfinite) {
    const double t = total.to(DType::f64).item<double>();
    KILN_CHECK(std::isfinite(t),
               "clipGradNorm_: the total norm of order {} of the gradients is {}, so they cannot be clipped "
               "(errorIfNonfinite is set)",
               normType, t);
  }
  // min(1, maxNorm / (total + 1e-6)), multiplied into every gradient.
  const Tensor coefficient = minimum(div(maxNorm, add(total, 1e-6)), 1.0);
  for (const Tensor& g : grads) g.mul_(coefficient.to(g.dtype()));
  return total;
}

}  // namespace kiln::nn::utils
