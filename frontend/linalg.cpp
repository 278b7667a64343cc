// matmul and linear (frontend/linalg.h): torch.matmul's 1-d cases become
// views (unsqueeze before, squeeze after) around the registry's `matmul` op,
// which takes operands of rank 2 or more. Checks name the shapes the user
// passed, before any view is made.
#include "frontend/linalg.h"

#include "frontend/amp/autocast.h"
#include "frontend/amp/autocast_policy.h"
#include "frontend/dispatch.h"
#include "frontend/ops.h"
#include "runtime/error.h"

namespace kiln {

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  KILN_CHECK(a0.defined() && b0.defined(), "matmul: argument {} is an undefined tensor", a0.defined() ? 1 : 0);
  const Tensor a = detail::autocastArg("matmul", a0), b = detail::autocastArg("matmul", b0);
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got {} and {}", a.str(),
             b.str());
  KILN_CHECK(a.device() == b.device(), "matmul: expected all tensors on the same device, got {} and {}", a.str(),
             b.str());
  KILN_CHECK(a.dtype() == b.dtype(), "matmul: expected both tensors of one dtype, got {} and {}", a.str(), b.str());
  KILN_CHECK(a.dtype() != DType::boolean, "matmul: dtype bool is not supported, got {} and {}", a.str(), b.str());
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  KILN_CHECK(ka == kb, "matmul: shapes {} and {} cannot be multiplied ({} != {})", a.str(), b.str(), ka, kb);
  const Shape batchA(a.shape().begin(), a.shape().end() - std::min(a.dim(), 2));
  const Shape batchB(b.shape().begin(), b.shape().end() - std::min(b.dim(), 2));
  KILN_CHECK(ir::broadcastShapes(batchA, batchB).has_value(),
             "matmul: batch dimensions {} and {} of {} and {} do not broadcast", ir::shapeStr(batchA),
             ir::shapeStr(batchB), a.str(), b.str());
  Tensor r = detail::dispatch(ir::Op::matmul, {a.dim() == 1 ? a.unsqueeze(0) : a, b.dim() == 1 ? b.unsqueeze(1) : b});
  if (a.dim() == 1 && b.dim() == 1) return r.reshape({});
  if (b.dim() == 1) return r.squeeze(-1);
  if (a.dim() == 1) return r.squeeze(-2);
  return r;
}

Tensor linear(const Tensor& x0, const Tensor& weight0, const Tensor& bias0) {
  KILN_CHECK(x0.defined() && weight0.defined(), "linear: argument {} is an undefined tensor", x0.defined() ? 1 : 0);
  const Tensor x = detail::autocastArg("linear", x0), weight = detail::autocastArg("linear", weight0);
  // Note [Autocast bias]: under autocast the bias is not cast to the low
  // dtype; the product's result is added to it in the bias's f32 and the
  // sum rounded once, in one kernel (the bias's cast, a broadcast of a
  // graph input, would be a kernel of its own: fuse-elementwise fuses no
  // producer of another domain). PyTorch's GEMMs add the bias in f32 too.
  const bool autocastBias = bias0.defined() && isAutocastEnabled(bias0.device().type()) &&
                            autocastDType(bias0.device().type()) == x.dtype() && isFloatingPoint(bias0.dtype()) &&
                            bias0.dtype() != DType::f64 && bias0.dtype() != x.dtype();
  const Tensor& bias = bias0;
  KILN_CHECK(weight.dim() == 2, "linear: expected a 2-d weight [out, in], got {}", weight.str());
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1),
             "linear: input {} does not match weight {} (expected the last dim of the input to be {})", x.str(),
             weight.str(), weight.size(1));
  KILN_CHECK(x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype() || autocastBias),
             "linear: expected input, weight and bias of one dtype, got {}, {} and {}", x.str(), weight.str(),
             bias.defined() ? bias.str() : "no bias");
  Tensor y = matmul(x, weight.t());
  if (!bias.defined()) return y;
  KILN_CHECK(ir::broadcastShapes(y.shape(), bias.shape()) == y.shape(),
             "linear: bias {} does not broadcast to the output {}", bias.str(), y.str());
  return autocastBias ? (y + bias).to(y.dtype()) : y + bias;
}

}  // namespace kiln
