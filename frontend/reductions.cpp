// The reductions of frontend/reductions.h: each is one dispatch() of its
// registry op, which checks the dims and dtypes (ir/reduction_rules.cpp).
#include "frontend/reductions.h"

#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/dispatch.h"
#include "frontend/ops.h"
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
  const int d = ir::normalizeDim("max", dim, x.type());  // name max, not amax, in the error
  const Tensor indices = argmax(x, dim, keepdim);
  Tensor values;
  {
    NoGradGuard noGrad;
    values = amax(x, {dim}, keepdim);
  }
  // PyTorch's value_selecting_reduction_backward: the whole gradient of a
  // row goes to the index max returns (the first maximum, or the first
  // NaN), so values and indices agree; amax's gradient instead splits it
  // over the ties. No scatter op yet: g lands where a position along `dim`
  // equals the index, one elementwise where().
  autograd::attach(
      "MaxBackward0", std::span<const Tensor>(&x, 1), std::span<const Tensor>(&values, 1),
      [saved = autograd::SavedTensor(indices), in = x.type(), d, keepdim](const std::vector<Tensor>& grads) {
        const Tensor& g = grads.at(0);
        if (in.shape.empty()) return std::vector<Tensor>{g};
        const Tensor index = saved.unpack("MaxBackward0");
        Shape along(in.shape.size(), 1);
        along[d] = in.shape[d];
        const Tensor positions = arange(0, static_cast<double>(in.shape[d]), 1, DType::i64, in.device).reshape(along);
        return std::vector<Tensor>{
            where(eq(positions, keepdim ? index : index.unsqueeze(d)), keepdim ? g : g.unsqueeze(d), 0.0)};
      });
  return {values, indices};
}

}  // namespace kiln
