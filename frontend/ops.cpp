// The eager op functions: each is one dispatch() of its op (clamp is two).
#include "frontend/ops.h"

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
  return minimum(maximum(x.to(dtype), min), max);
}

Tensor neg(const Tensor& x) { return detail::dispatch(Op::neg, {x}); }
Tensor relu(const Tensor& x) { return detail::dispatch(Op::relu, {x}); }
Tensor exp(const Tensor& x) { return detail::dispatch(Op::exp, {x}); }
Tensor log(const Tensor& x) { return detail::dispatch(Op::log, {x}); }
Tensor sqrt(const Tensor& x) { return detail::dispatch(Op::sqrt, {x}); }
Tensor tanh(const Tensor& x) { return detail::dispatch(Op::tanh, {x}); }
Tensor sigmoid(const Tensor& x) { return detail::dispatch(Op::sigmoid, {x}); }

}  // namespace kiln
