// kiln::scaledDotProductAttention (frontend/attention.h): checks, batch
// dims broadcast by views, then one `attention` op where ir::fusedAttentionOn
// says it runs fused, else the unfused ops.
#include "frontend/attention.h"

#include <cmath>
#include <limits>

#include "frontend/autograd/grad_mode.h"
#include "frontend/dispatch.h"
#include "frontend/dropout.h"
#include "frontend/linalg.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "ir/attention.h"
#include "runtime/error.h"

namespace kiln {

namespace {
/// x with batch dims `batch` (its own broadcast to them: a view).
Tensor withBatch(const Tensor& x, const Shape& batch) {
  Shape shape = batch;
  shape.insert(shape.end(), x.shape().end() - 2, x.shape().end());
  Shape own(static_cast<size_t>(shape.size() - x.shape().size()), 1);
  own.insert(own.end(), x.shape().begin(), x.shape().end());
  return x.reshape(own).expand(shape);
}

std::string describe(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  return fmt::format("q {}, k {}, v {}{}", q.str(), k.str(), v.str(), mask.defined() ? ", mask " + mask.str() : "");
}
}  // namespace

Tensor scaledDotProductAttention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  const Tensor& mask = options.attnMask;
  KILN_CHECK(q.defined() && k.defined() && v.defined(), "scaledDotProductAttention: q, k and v must be defined");
  const std::string what = describe(q, k, v, mask);
  KILN_CHECK(q.device() == k.device() && q.device() == v.device() && (!mask.defined() || mask.device() == q.device()),
             "scaledDotProductAttention: expected all tensors on one device, got {}", what);
  KILN_CHECK(isFloatingPoint(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(),
             "scaledDotProductAttention: expected q, k and v of one floating-point dtype, got {}", what);
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
             "scaledDotProductAttention: expected q, k and v of 2 or more dims, got {}", what);
  const int64_t e = q.size(-1), lq = q.size(-2), lk = k.size(-2);
  KILN_CHECK(k.size(-1) == e, "scaledDotProductAttention: q and k must have the same last dim (E), got {}", what);
  KILN_CHECK(v.size(-2) == lk, "scaledDotProductAttention: k and v must have the same number of keys, got {}", what);
  const auto batchOf = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  std::optional<Shape> batch = ir::broadcastShapes(batchOf(q), batchOf(k));
  if (batch) batch = ir::broadcastShapes(*batch, batchOf(v));
  KILN_CHECK(batch.has_value(), "scaledDotProductAttention: batch dims do not broadcast: {}", what);
  Shape weights = *batch;
  weights.insert(weights.end(), {lq, lk});
  if (mask.defined()) {
    KILN_CHECK(mask.dtype() == DType::boolean || mask.dtype() == q.dtype(),
               "scaledDotProductAttention: expected a bool mask or one of q's dtype, got {}", what);
    KILN_CHECK(mask.dim() <= static_cast<int64_t>(weights.size()) && ir::broadcastShapes(mask.shape(), weights) == weights,
               "scaledDotProductAttention: mask {} does not broadcast to the weights' shape {} ({})", mask.str(),
               ir::shapeStr(weights), what);
    KILN_CHECK(!(mask.requiresGrad() && isGradEnabled()),
               "scaledDotProductAttention: a mask that requires grad is not supported (it gets no gradient), got {}",
               what);
  }
  const double p = options.dropoutP;
  KILN_CHECK(p >= 0.0 && p < 1.0, "scaledDotProductAttention: dropoutP must be in [0, 1), got {}", p);
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(e)));
  KILN_CHECK(std::isfinite(scale), "scaledDotProductAttention: scale must be finite, got {}", scale);
  Generator& generator = options.generator ? *options.generator : defaultGenerator();
  const Tensor qb = withBatch(q, *batch), kb = withBatch(k, *batch), vb = withBatch(v, *batch);

  if (ir::fusedAttentionOn(q.device(), q.dtype())) {
    std::vector<detail::Operand> operands = {qb, kb, vb};
    if (mask.defined()) operands.emplace_back(mask);
    if (p > 0)
      for (const Tensor& t : detail::dropoutDraw(generator, q.device())) operands.emplace_back(t);
    return detail::dispatch(ir::Op::attention, std::move(operands),
                            {{"scale", scale}, {"causal", int64_t{options.isCausal ? 1 : 0}}, {"p", p}});
  }
  // The unfused ops: the same scores, mask and draw (dropout on the weights
  // [..., Lq, Lk]).
  const double inf = std::numeric_limits<double>::infinity();
  Tensor s = mul(matmul(qb, kb.transpose(-2, -1)), scale);
  if (options.isCausal) {
    const Tensor i = arange(0, static_cast<double>(lq), 1, DType::i64, q.device()).reshape({lq, 1});
    const Tensor j = arange(0, static_cast<double>(lk), 1, DType::i64, q.device()).reshape({1, lk});
    s = where(le(j, i), s, -inf);
  }
  if (mask.defined()) s = mask.dtype() == DType::boolean ? where(mask, s, -inf) : add(s, mask);
  Tensor w = softmax(s, -1);
  if (p > 0) w = dropout(w, p, true, generator);
  return matmul(w, vb);
}

}  // namespace kiln
