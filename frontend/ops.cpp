// The eager op functions: each is one dispatch() of its op (clamp is two).
#include "frontend/ops.h"

#include <optional>

#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "runtime/error.h"

namespace kiln {

namespace {
using ir::Op;

Tensor binary(Op op, const Operand& a, const Operand& b) {
  KILN_CHECK(!(a.isScalar && b.isScalar), "{}: expected at least one tensor, got two scalars", ir::opName(op));
  return detail::dispatch(op, {a, b});
}
}  // namespace

Tensor add(const Operand& a, const Operand& b) { return binary(Op::add, a, b); }
Tensor sub(const Operand& a, const Operand& b) { return binary(Op::sub, a, b); }
Tensor mul(const Operand& a, const Operand& b) { return binary(Op::mul, a, b); }
Tensor div(const Operand& a, const Operand& b) { return binary(Op::div, a, b); }
Tensor maximum(const Operand& a, const Operand& b) { return binary(Op::maximum, a, b); }
Tensor minimum(const Operand& a, const Operand& b) { return binary(Op::minimum, a, b); }

Tensor pow(const Operand& base, const Operand& exponent) {
  // PyTorch refuses an integer tensor to a negative integer scalar power
  // (its result would be 0 but for bases 1 and -1); a tensor exponent gets
  // the element formula (docs/ops.md).
  if (!base.isScalar && base.tensor.defined() && exponent.kind == Operand::Kind::integer && exponent.intScalar < 0)
    KILN_CHECK(isFloatingPoint(detail::promotedDType(Op::pow, std::vector<Operand>{base, exponent})),
               "pow: integers to negative integer powers are not allowed, got {} ^ {}", base.tensor.str(),
               exponent.intScalar);
  return binary(Op::pow, base, exponent);
}

Tensor eq(const Operand& a, const Operand& b) { return binary(Op::eq, a, b); }
Tensor ne(const Operand& a, const Operand& b) { return binary(Op::ne, a, b); }
Tensor lt(const Operand& a, const Operand& b) { return binary(Op::lt, a, b); }
Tensor le(const Operand& a, const Operand& b) { return binary(Op::le, a, b); }
Tensor gt(const Operand& a, const Operand& b) { return binary(Op::gt, a, b); }
Tensor ge(const Operand& a, const Operand& b) { return binary(Op::ge, a, b); }

Tensor where(const Tensor& condition, const Operand& a, const Operand& b) {
  return detail::dispatch(Op::where, {condition, a, b});
}

Tensor clamp(const Tensor& x, const Operand& min, const Operand& max) {
  KILN_CHECK(x.defined(), "clamp: argument 0 is an undefined tensor");
  // The result dtype of all three, as torch.clamp promotes them; the two
  // steps then compute in it, so the order of promotion cannot matter.
  const DType dtype = detail::promotedDType(Op::maximum, std::vector<Operand>{x, min, max});
  Tensor y;
  {
    NoGradGuard noGrad;
    y = minimum(maximum(x.to(dtype), min), max);
  }
  // PyTorch's gradient: g to x where min <= x <= max, to min where x < min,
  // to max where x > max (not the chain rule through maximum and minimum,
  // which would halve it at the bounds).
  std::vector<Tensor> inputs{x, min.isScalar ? Tensor() : min.tensor, max.isScalar ? Tensor() : max.tensor};
  auto save = [](const Operand& o) { return o.isScalar ? std::optional<Operand>(o) : std::nullopt; };
  autograd::attach("ClampBackward", inputs, std::span<const Tensor>(&y, 1),
                   [sx = autograd::SavedTensor(x), smin = inputs[1].defined() ? autograd::SavedTensor(inputs[1])
                                                                              : autograd::SavedTensor(),
                    smax = inputs[2].defined() ? autograd::SavedTensor(inputs[2]) : autograd::SavedTensor(),
                    lo = save(min), hi = save(max)](const std::vector<Tensor>& grads) {
                     const char* node = "ClampBackward";
                     const Tensor xv = sx.unpack(node), g = grads.at(0);
                     const Operand mn = lo ? *lo : Operand(smin.unpack(node));
                     const Operand mx = hi ? *hi : Operand(smax.unpack(node));
                     const Tensor inside = minimum(ge(xv, mn), le(xv, mx));
                     return std::vector<Tensor>{where(inside, g, 0.0), lo ? Tensor() : where(lt(xv, mn), g, 0.0),
                                                hi ? Tensor() : where(gt(xv, mx), g, 0.0)};
                   });
  return y;
}

Tensor neg(const Tensor& x) { return detail::dispatch(Op::neg, {x}); }
Tensor relu(const Tensor& x) { return detail::dispatch(Op::relu, {x}); }
Tensor exp(const Tensor& x) { return detail::dispatch(Op::exp, {x}); }
Tensor log(const Tensor& x) { return detail::dispatch(Op::log, {x}); }
Tensor sqrt(const Tensor& x) { return detail::dispatch(Op::sqrt, {x}); }
Tensor tanh(const Tensor& x) { return detail::dispatch(Op::tanh, {x}); }
Tensor sigmoid(const Tensor& x) { return detail::dispatch(Op::sigmoid, {x}); }
Tensor abs(const Tensor& x) { return detail::dispatch(Op::abs, {x}); }
Tensor rsqrt(const Tensor& x) { return detail::dispatch(Op::rsqrt, {x}); }
Tensor sin(const Tensor& x) { return detail::dispatch(Op::sin, {x}); }
Tensor cos(const Tensor& x) { return detail::dispatch(Op::cos, {x}); }
Tensor erf(const Tensor& x) { return detail::dispatch(Op::erf, {x}); }
Tensor silu(const Tensor& x) { return detail::dispatch(Op::silu, {x}); }

Tensor gelu(const Tensor& x, std::string_view approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '{}'",
             approximate);
  return detail::dispatch(Op::gelu, {x}, {{"approximate", int64_t{approximate == "tanh" ? 1 : 0}}});
}

}  // namespace kiln
