// In-place ops (Tensor::add_, mul_, copy_, ...; frontend/tensor.h).
//
// Note [In-place ops]
// An in-place op computes its result out of place, through the ordinary op
// (so eager and traced code, promotion and gradients are the ops' own),
// converts it to the tensor's dtype and writes it into the tensor's
// elements through its strides — a view writes into its base — then bumps
// the version counter that the tensor shares with its views, so that a
// tensor autograd saved and that was overwritten is detected at backward
// (Note [Saved tensors]). When nothing else can see the old storage (no
// view, no saved tensor, no other handle) and the result's storage is
// equally private, the tensor takes the result's storage instead of copying
// it. Under autograd the tensor's history moves to the result's node. Not
// supported (errors that say so): in-place on a leaf that requires grad
// while grad mode is on (as PyTorch), on a view of, or into a view from,
// tensors that require grad, and on a view while tracing.
#include "frontend/inplace.h"

#include <fmt/format.h>

#include "frontend/autograd/grad_mode.h"
#include "frontend/autograd/node.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "frontend/trace.h"
#include "runtime/error.h"

namespace kiln {

namespace {

/// Whether a result of `from` may be written into a tensor of `to`, as
/// PyTorch's canCast: not a float into an integer or bool, not a number into bool.
bool canCast(DType from, DType to) {
  if (isFloatingPoint(from) && !isFloatingPoint(to)) return false;
  if (from != DType::boolean && to == DType::boolean) return false;
  return true;
}

}  // namespace

void detail::storeInto(const Tensor& target, Tensor&& value) {
  TensorImpl* impl = target.impl();
  if (value.impl()->storage != impl->storage) {
    if (!value.isContiguous()) value = value.contiguous();
    const bool privateTarget = !impl->isView && impl->storage.use_count() == 1 && impl->offset == 0 &&
                               target.isContiguous() && impl->version.use_count() == 1;
    const bool privateValue = value.implPtr().use_count() == 1 && value.impl()->storage.use_count() == 1 &&
                              value.storageOffset() == 0 && value.impl()->storage->bytes() == impl->storage->bytes();
    if (privateTarget && privateValue)
      impl->storage = value.impl()->storage;
    else
      copyInto(target, value);
  }
  ++*impl->version;
}

namespace {

const Tensor& writeInPlace(const Tensor& self, const char* name, Tensor result) {
  KILN_CHECK(result.shape() == self.shape(),
             "{}: the result {} does not fit {} (an in-place op does not broadcast the tensor it writes)", name,
             result.str(), self.str());
  KILN_CHECK(canCast(result.dtype(), self.dtype()), "{}: result type {} cannot be cast to the dtype of {}", name,
             dtypeName(result.dtype()), self.str());
  TensorImpl* impl = self.impl();
  if (isGradEnabled()) {
    const autograd::Meta* meta = impl->autograd.get();
    KILN_CHECK(!(meta && meta->requiresGrad && !meta->gradFn),
               "{}: {} is a leaf that requires grad and cannot be modified in place while gradients are recorded "
               "(wrap the update in a kiln::NoGradGuard)",
               name, self.str());
    KILN_CHECK(!impl->isView || !(self.requiresGrad() || result.requiresGrad()),
               "{}: in-place ops on a view with gradients are not supported; {} is a view (write into a clone, or "
               "under a kiln::NoGradGuard)",
               name, self.str());
  }
  if (result.dtype() != self.dtype()) result = result.to(self.dtype());
  // What the result's history is, read before storeInto may take it.
  const std::shared_ptr<autograd::Meta> resultMeta = result.impl()->autograd;
  const bool resultRequiresGrad = result.requiresGrad();
  detail::TraceState* trace = detail::TraceState::current();
  // Inside a trace, an eager result (fill_'s full(), copy_ from an eager
  // tensor) is a value of the program too, so that the write happens at
  // every call, as eagerly, not once while tracing.
  if (trace && !result.isTraced()) result = trace->wrap(trace->valueOf(result, name));
  if (impl->traced) {
    KILN_CHECK(!impl->isView,
               "{}: in-place ops on a view are not supported while tracing (kiln::compile); {} is a view", name,
               self.str());
    KILN_CHECK(result.impl()->trace == impl->trace, "{}: {} belongs to another trace", name, self.str());
    impl->traced = result.impl()->traced;
    impl->strides = result.strides();
    impl->offset = result.storageOffset();
    ++*impl->version;
  } else if (trace && result.isTraced()) {
    // An eager tensor updated by traced code (an optimizer's step inside
    // kiln::compile): the trace records the new value and the program
    // writes it back after each call (Note [Writes into eager state]).
    trace->writeEager(self, result, name);
    ++*impl->version;
  } else {
    KILN_CHECK(!result.isTraced(),
               "{}: cannot write a value computed while tracing into {}, which lives outside the trace", name,
               self.str());
    detail::storeInto(self, std::move(result));
  }
  if (isGradEnabled() || resultRequiresGrad) {
    autograd::Meta* rm = resultMeta.get();
    if (rm && rm->gradFn) {
      autograd::Meta& meta = autograd::metaOf(self);
      meta.gradFn = rm->gradFn;
      meta.outputNr = rm->outputNr;
    } else if (impl->autograd && impl->autograd->gradFn) {
      impl->autograd->gradFn = nullptr;  // overwritten by a value without history: a constant now
    }
  }
  return self;
}

}  // namespace

const Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  return writeInPlace(*this, "add_", alpha == 1.0 ? add(*this, other) : add(*this, mul(other, alpha)));
}
const Tensor& Tensor::add_(double other) const { return writeInPlace(*this, "add_", add(*this, other)); }
const Tensor& Tensor::sub_(const Tensor& other, double alpha) const {
  return writeInPlace(*this, "sub_", alpha == 1.0 ? sub(*this, other) : sub(*this, mul(other, alpha)));
}
const Tensor& Tensor::sub_(double other) const { return writeInPlace(*this, "sub_", sub(*this, other)); }
const Tensor& Tensor::mul_(const Tensor& other) const { return writeInPlace(*this, "mul_", mul(*this, other)); }
const Tensor& Tensor::mul_(double other) const { return writeInPlace(*this, "mul_", mul(*this, other)); }
const Tensor& Tensor::div_(const Tensor& other) const { return writeInPlace(*this, "div_", div(*this, other)); }
const Tensor& Tensor::div_(double other) const { return writeInPlace(*this, "div_", div(*this, other)); }
const Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) const {
  auto bound = [](std::optional<double> b) { return b ? std::optional<detail::Operand>(*b) : std::nullopt; };
  return writeInPlace(*this, "clamp_", clamp(*this, bound(min), bound(max)));
}
const Tensor& Tensor::relu_() const { return writeInPlace(*this, "relu_", relu(*this)); }
const Tensor& Tensor::neg_() const { return writeInPlace(*this, "neg_", neg(*this)); }
const Tensor& Tensor::sqrt_() const { return writeInPlace(*this, "sqrt_", sqrt(*this)); }
const Tensor& Tensor::exp_() const { return writeInPlace(*this, "exp_", exp(*this)); }

const Tensor& Tensor::copy_(const Tensor& src) const {
  KILN_CHECK(src.defined(), "copy_: the source is an undefined tensor");
  KILN_CHECK(src.device() == device(), "copy_: cannot copy {} into {} across devices", src.str(), str());
  // copy_ converts from any dtype, unlike the arithmetic in-place ops.
  Tensor from = src.expand(shape());  // errors name expand's rules
  return writeInPlace(*this, "copy_", from.dtype() == dtype() ? from : from.to(dtype()));
}

const Tensor& Tensor::fill_(double value) const {
  KILN_CHECK(defined(), "fill_: use of an undefined tensor");
  return writeInPlace(*this, "fill_", full(shape(), value, dtype(), device()));
}
const Tensor& Tensor::zero_() const { return fill_(0.0); }

}  // namespace kiln
