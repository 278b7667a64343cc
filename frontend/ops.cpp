// The eager op functions: each is one dispatch() of its op (clamp is two,
// with its own gradient: Note [Clamp gradients]).
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

namespace {
/// Note [Clamp gradients]: PyTorch 2.x (checked against 2.15 on every
/// combination of -inf, -1, 0, 1, inf and NaN for x, min and max) has two
/// rules. Number bounds: g where min < x < max, strictly, else 0 (0 at the
/// bounds, for NaN x, for min >= max, for a NaN bound). Tensor bounds: the
/// rule of `grads` below, which splits g between x and a bound that x
/// equals when min < max. With one bound only, a tensor bound is plain
/// maximum or minimum (clamp() runs them), and a number bound keeps the
/// strict rule. kiln's mixed call (a tensor and a number) takes the tensor
/// rule, the number a bound without a gradient, as PyTorch does with the
/// number made a 0-d tensor (torch.clamp takes no mix).
std::vector<Tensor> clampTensorGrads(const Tensor& g, const Tensor& x, const Operand& lo, const Operand& hi) {
  const Tensor half = div(g, 2.0);
  const Tensor ordered = lt(lo, hi);
  // x: 0 outside [min, max] (NaN x is inside: both compares are false), a
  // half where it ties a bound of a non-empty range, else g.
  const Tensor tie = minimum(maximum(eq(x, lo), eq(x, hi)), ordered);
  const Tensor gx = where(maximum(lt(x, lo), gt(x, hi)), 0.0, where(tie, half, g));
  // min: g below it, a half at it, when min <= max (min < max for the half).
  const Tensor gmin = where(minimum(lt(x, lo), le(lo, hi)), g, where(minimum(eq(x, lo), ordered), half, 0.0));
  // max: g above it when min <= max, and everywhere when min > max (the
  // result is max then, even for NaN x); a half at it when min < max.
  const Tensor above = maximum(gt(lo, hi), minimum(gt(x, hi), le(lo, hi)));
  const Tensor gmax = where(above, g, where(minimum(eq(x, hi), ordered), half, 0.0));
  return {gx, gmin, gmax};
}

/// g where x is strictly inside the bounds given, else 0.
Tensor clampNumberGrad(const Tensor& g, const Tensor& x, const std::optional<Operand>& lo,
                       const std::optional<Operand>& hi) {
  Tensor inside = lo ? gt(x, *lo) : Tensor();
  if (hi) inside = inside.defined() ? minimum(inside, lt(x, *hi)) : lt(x, *hi);
  return where(inside, g, 0.0);
}
}  // namespace

Tensor clamp(const Tensor& x, const std::optional<Operand>& min, const std::optional<Operand>& max) {
  KILN_CHECK(x.defined(), "clamp: argument 0 is an undefined tensor");
  KILN_CHECK(min || max, "clamp: expected a min or a max bound, got neither");
  const bool tensorMin = min && !min->isScalar, tensorMax = max && !max->isScalar;
  // One tensor bound: maximum or minimum, with their gradients, as PyTorch.
  if (tensorMin && !max) return maximum(x, *min);
  if (tensorMax && !min) return minimum(x, *max);
  // The result dtype of all three, as torch.clamp promotes them; the two
  // steps then compute in it, so the order of promotion cannot matter.
  std::vector<Operand> all{x};
  for (const auto& b : {min, max})
    if (b) all.push_back(*b);
  const DType dtype = detail::promotedDType(Op::maximum, all);
  Tensor y;
  {
    NoGradGuard noGrad;
    y = x.to(dtype);
    if (min) y = maximum(y, *min);
    if (max) y = minimum(y, *max);
  }
  // Note [Clamp gradients]: not the chain rule through maximum and minimum.
  if (!tensorMin && !tensorMax) {
    // The number rule reads the result: min < y < max exactly where min <
    // x < max (y is a bound or NaN elsewhere), so clamp_, which overwrites
    // x, needs no copy of it.
    autograd::attach("ClampBackward", std::span<const Tensor>(&x, 1), std::span<const Tensor>(&y, 1),
                     [sy = autograd::SavedTensor(y), min, max](const std::vector<Tensor>& grads) {
                       return std::vector<Tensor>{clampNumberGrad(grads.at(0), sy.unpack("ClampBackward"), min, max)};
                     });
    return y;
  }
  // The tensor rule (both bounds are given here): each bound is its number
  // or its saved tensor, compared in the dtype the forward compared in.
  struct Bound {
    std::optional<Operand> number;
    autograd::SavedTensor tensor;
    Operand get(DType dtype) const { return number ? *number : Operand(tensor.unpack("ClampBackward").to(dtype)); }
  };
  auto bound = [](const std::optional<Operand>& b) {
    return b->isScalar ? Bound{b, {}} : Bound{std::nullopt, autograd::SavedTensor(b->tensor)};
  };
  std::vector<Tensor> inputs{x, tensorMin ? min->tensor : Tensor(), tensorMax ? max->tensor : Tensor()};
  autograd::attach(
      "ClampBackward", inputs, std::span<const Tensor>(&y, 1),
      [sx = autograd::SavedTensor(x), lo = bound(min), hi = bound(max), dtype](const std::vector<Tensor>& grads) {
        const Tensor xv = sx.unpack("ClampBackward").to(dtype);
        return clampTensorGrads(grads.at(0), xv, lo.get(dtype), hi.get(dtype));
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

Tensor softplus(const Tensor& x, double beta, double threshold) {
  return detail::dispatch(Op::softplus, {x}, {{"beta", beta}, {"threshold", threshold}});
}

Tensor optimizationBarrier(const Tensor& x, const Tensor& after) {
  KILN_CHECK(x.defined() && after.defined(), "opt_barrier: an undefined tensor");
  KILN_CHECK(after.numel() > 0, "opt_barrier: `after` {} has no element", after.str());
  // Its first element, as a view whatever its strides (a reshape of an
  // expanded gradient to 1-d would copy it whole).
  Tensor token = after.detach();
  for (int64_t d = 0; d < token.dim(); ++d) token = token.narrow(d, 0, 1);
  token = token.reshape({});
  if (token.dtype() != x.dtype()) token = token.to(x.dtype());
  return detail::dispatch(Op::opt_barrier, {x, token});
}

}  // namespace kiln
