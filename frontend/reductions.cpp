// The reductions of frontend/reductions.h: each is one dispatch() of its
// registry op, which checks the dims and dtypes (ir/reduction_rules.cpp).
#include "frontend/reductions.h"

#include "frontend/dispatch.h"
#include "runtime/error.h"

namespace kiln {

namespace {
using ir::Op;

Tensor reduce(Op op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, ir::Attributes attrs = {}) {
  KILN_CHECK(x.defined(), "{}: argument 0 is an undefined tensor", ir::opName(op));
  attrs["dims"] = dims;
  attrs["keepdim"] = int64_t{keepdim};
  return detail::dispatch(op, {x}, attrs);
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Op::sum, x, dims, keepdim);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Op::mean, x, dims, keepdim);
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Op::amax, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(Op::amin, x, dims, keepdim);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return reduce(Op::var, x, dims, keepdim, {{"correction", correction}});
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  KILN_CHECK(x.defined(), "argmax: argument 0 is an undefined tensor");
  return detail::dispatch(Op::argmax, {x}, {{"dim", dim}, {"keepdim", int64_t{keepdim}}});
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  KILN_CHECK(x.defined(), "max: argument 0 is an undefined tensor");
  ir::normalizeDim("max", dim, x.type());  // name max, not amax, in the error
  return {amax(x, {dim}, keepdim), argmax(x, dim, keepdim)};
}

}  // namespace kiln
