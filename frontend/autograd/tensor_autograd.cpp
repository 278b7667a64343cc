// The autograd methods of Tensor (frontend/tensor.h).
#include <fmt/format.h>

#include "frontend/autograd/engine.h"
#include "frontend/autograd/node.h"
#include "frontend/trace.h"
#include "frontend/tensor.h"
#include "runtime/error.h"

namespace kiln {

bool Tensor::requiresGrad() const {
  KILN_CHECK(impl_, "requiresGrad: use of an undefined tensor");
  const autograd::Meta* meta = impl()->autograd.get();
  return meta && (meta->requiresGrad || meta->gradFn);
}

const Tensor& Tensor::setRequiresGrad(bool requiresGrad) const {
  KILN_CHECK(impl_, "setRequiresGrad: use of an undefined tensor");
  autograd::Meta* meta = impl()->autograd.get();
  KILN_CHECK(!(meta && meta->gradFn),
             "setRequiresGrad: {} is not a leaf (it was computed by {}); call it on a leaf, or on detach() of it", str(),
             meta ? meta->gradFn->name() : "");
  KILN_CHECK(!requiresGrad || isFloatingPoint(dtype()),
             "setRequiresGrad: only floating-point tensors (f32, f64, f16, bf16) can require gradients, got {}",
             str());
  if (requiresGrad || meta) autograd::metaOf(*this).requiresGrad = requiresGrad;
  return *this;
}

Tensor Tensor::grad() const {
  KILN_CHECK(impl_, "grad: use of an undefined tensor");
  // Inside kiln::compile the gradient of an eager leaf is what the trace
  // sees (Note [Writes into eager state] in frontend/trace.h).
  if (detail::TraceState* trace = detail::TraceState::current(); trace && !isTraced()) return trace->gradOf(*this);
  const autograd::Meta* meta = impl()->autograd.get();
  return meta ? meta->grad : Tensor();
}

void Tensor::setGrad(const Tensor& grad) const {
  KILN_CHECK(impl_, "setGrad: use of an undefined tensor");
  KILN_CHECK(!grad.defined() || (grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device()),
             "setGrad: a gradient {} does not match tensor {}", grad.str(), str());
  if (detail::TraceState* trace = detail::TraceState::current(); trace && !isTraced()) {
    trace->setGradOf(*this, grad);
    return;
  }
  KILN_CHECK(isTraced() || !grad.isTraced(), "setGrad: the gradient {} was produced while tracing and has no value here",
             grad.str());
  if (!grad.defined() && !impl()->autograd) return;
  autograd::metaOf(*this).grad = grad;
}

bool Tensor::isLeaf() const {
  KILN_CHECK(impl_, "isLeaf: use of an undefined tensor");
  const autograd::Meta* meta = impl()->autograd.get();
  return !meta || !meta->gradFn;
}

std::string Tensor::gradFnName() const {
  KILN_CHECK(impl_, "gradFnName: use of an undefined tensor");
  const autograd::Meta* meta = impl()->autograd.get();
  return meta && meta->gradFn ? meta->gradFn->name() : std::string();
}

void Tensor::backward(const Tensor& gradient, bool retainGraph) const {
  KILN_CHECK(impl_, "backward: use of an undefined tensor");
  Tensor g = gradient;
  if (!g.defined()) {
    KILN_CHECK(numel() == 1,
               "backward: a gradient can be implied only for a tensor with one element, got {}; pass "
               "backward(gradient) with d(loss)/d(this)",
               str());
    g = ones(shape(), dtype(), device());
  }
  KILN_CHECK(g.shape() == shape() && g.device() == device(),
             "backward: gradient {} does not match the shape and device of {}", g.str(), str());
  if (g.dtype() != dtype()) g = g.to(dtype());
  autograd::runBackward({*this}, {g}, retainGraph);
}

Tensor Tensor::detach() const {
  KILN_CHECK(impl_, "detach: use of an undefined tensor");
  return autograd::shallowCopy(*this);
}

uint64_t Tensor::version() const {
  KILN_CHECK(impl_, "version: use of an undefined tensor");
  return *impl_->version;
}

}  // namespace kiln
