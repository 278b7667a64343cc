// gradcheck (frontend/autograd/gradcheck.h).
#include "frontend/autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "frontend/autograd/grad_mode.h"
#include "runtime/error.h"

namespace kiln {

namespace {
std::vector<double> valuesOf(const Tensor& t) { return t.to(DType::f64).contiguous().toVector<double>(); }
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  // Fresh contiguous leaves, so that perturbing them touches nothing else.
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requiresGrad()) {
      xs.push_back(t);
      continue;
    }
    KILN_CHECK(t.dtype() == DType::f64,
               "gradcheck: input {} requires grad and must be f64 for finite differences, got {}", i, t.str());
    NoGradGuard noGrad;
    Tensor leaf = t.detach().clone();
    leaf.setRequiresGrad();
    xs.push_back(leaf);
  }
  int64_t outputs = 0;
  {
    NoGradGuard noGrad;
    outputs = fn(xs).numel();
  }
  // Numerical Jacobian, one column per input element.
  std::vector<std::vector<std::vector<double>>> numerical(xs.size());  // [input][element][output]
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined() || !xs[i].requiresGrad()) continue;
    // Each element is perturbed in place on the input's device (a fill of
    // one element of a view), so gradcheck runs wherever the input lives.
    const std::vector<double> values = valuesOf(xs[i]);
    NoGradGuard noGrad;
    const Tensor flat = xs[i].view({-1});
    for (int64_t j = 0; j < xs[i].numel(); ++j) {
      const Tensor element = flat.narrow(0, j, 1);
      const double x = values[static_cast<size_t>(j)];
      element.fill_(x + options.eps);
      std::vector<double> plus = valuesOf(fn(xs));
      element.fill_(x - options.eps);
      std::vector<double> minus = valuesOf(fn(xs));
      element.fill_(x);
      std::vector<double> column(static_cast<size_t>(outputs));
      for (int64_t k = 0; k < outputs; ++k) column[k] = (plus[k] - minus[k]) / (2 * options.eps);
      numerical[i].push_back(std::move(column));
    }
  }
  // Analytical Jacobian, one row per output element.
  const Tensor out = fn(xs);
  KILN_CHECK(out.requiresGrad(), "gradcheck: the function's result {} does not require grad", out.str());
  for (int64_t k = 0; k < outputs; ++k) {
    for (const Tensor& x : xs)
      if (x.defined() && x.requiresGrad()) x.setGrad({});
    std::vector<double> oneHot(static_cast<size_t>(outputs), 0.0);
    oneHot[k] = 1.0;
    out.backward(fromVector(oneHot, out.shape(), out.device()).to(out.dtype()), /*retainGraph=*/true);
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!xs[i].defined() || !xs[i].requiresGrad()) continue;
      const Tensor g = xs[i].grad();
      const std::vector<double> analytical =
          g.defined() ? valuesOf(g) : std::vector<double>(static_cast<size_t>(xs[i].numel()), 0.0);
      for (int64_t j = 0; j < xs[i].numel(); ++j) {
        const double a = analytical[j], n = numerical[i][j][k];
        if (std::abs(a - n) <= options.atol + options.rtol * std::abs(n)) continue;
        return {false, fmt::format("gradcheck: d output[{}] / d input {}[{}]: analytical {:.10g}, numerical {:.10g} "
                                   "(input {}, output {})",
                                   k, i, j, a, n, xs[i].str(), out.str())};
      }
    }
  }
  return {};
}

}  // namespace kiln
