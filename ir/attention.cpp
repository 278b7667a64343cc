// The rules of attention and attention_backward (ir/attention.h).
#include "ir/attention.h"

#include <cmath>

#include "runtime/error.h"

namespace kiln::ir {

AttentionOperands attentionOperands(Op op, int numInputs, const Attributes& attrs) {
  const std::string_view name = opName(op);
  AttentionOperands a;
  a.data = op == Op::attention_backward ? 5 : 3;
  a.scale = floatAttr(attrs, "scale", name);
  const int64_t causal = intAttr(attrs, "causal", name);
  KILN_CHECK(causal == 0 || causal == 1, "{}: attribute causal must be 0 or 1, got {}", name, causal);
  a.causal = causal == 1;
  a.p = floatAttr(attrs, "p", name);
  KILN_CHECK(a.p >= 0.0 && a.p < 1.0, "{}: attribute p (dropout) must be in [0, 1), got {}", name, a.p);
  KILN_CHECK(std::isfinite(a.scale), "{}: attribute scale must be finite, got {}", name, a.scale);
  const int optional = numInputs - a.data - (a.p > 0 ? 2 : 0);
  KILN_CHECK(optional == 0 || optional == 1,
             "{}: expected {} operands{}, or one more for a mask; got {}", name, a.data + (a.p > 0 ? 2 : 0),
             a.p > 0 ? " (with dropout's seed and offset)" : "", numInputs);
  if (optional == 1) a.mask = a.data;
  if (a.p > 0) a.seed = a.data + optional;
  return a;
}

bool fusedAttentionOn(const Device& device, DType dtype) {
  return device.type() == DeviceType::cpu && (dtype == DType::f32 || dtype == DType::f64);
}

namespace detail {
namespace {
std::string typesStr(std::span<const TensorType> types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i == 0 ? "" : ", ") + types[i].str();
  return s;
}
}  // namespace

TensorType inferAttention(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  const std::string_view name = opName(op);
  const AttentionOperands a = attentionOperands(op, static_cast<int>(in.size()), attrs);
  const TensorType &q = in[0], &k = in[1], &v = in[2];
  for (const TensorType& t : in.subspan(1))
    KILN_CHECK(t.device == q.device, "{}: expected all tensors on the same device, got {}", name, typesStr(in));
  KILN_CHECK(fusedAttentionOn(q.device, q.dtype),
             "{}: runs on the CPU in f32 or f64 (kiln::scaledDotProductAttention writes the unfused ops "
             "elsewhere), got {}",
             name, typesStr(in));
  KILN_CHECK(q.rank() >= 2 && k.rank() == q.rank() && v.rank() == q.rank(),
             "{}: expected q, k and v of one rank, 2 or more, got {}", name, typesStr(in));
  KILN_CHECK(k.dtype == q.dtype && v.dtype == q.dtype, "{}: expected q, k and v of one dtype, got {}", name,
             typesStr(in));
  const int r = q.rank();
  const Shape batch(q.shape.begin(), q.shape.end() - 2);
  KILN_CHECK(Shape(k.shape.begin(), k.shape.end() - 2) == batch && Shape(v.shape.begin(), v.shape.end() - 2) == batch,
             "{}: expected q, k and v with equal batch dims, got {}", name, typesStr(in));
  const int64_t lq = q.shape[r - 2], e = q.shape[r - 1], lk = k.shape[r - 2], ev = v.shape[r - 1];
  KILN_CHECK(k.shape[r - 1] == e, "{}: q and k must have the same last dim (E), got {}", name, typesStr(in));
  KILN_CHECK(v.shape[r - 2] == lk, "{}: k and v must have the same number of keys (dim -2), got {}", name,
             typesStr(in));
  Shape out = batch;
  out.insert(out.end(), {lq, ev});
  if (op == Op::attention_backward) {
    KILN_CHECK(in[3].dtype == q.dtype && in[3].shape == out && in[4].dtype == q.dtype && in[4].shape == out,
               "{}: expected out and its gradient of type {}, got {}", name, TensorType{q.dtype, out, q.device}.str(),
               typesStr(in));
  }
  if (a.mask >= 0) {
    const TensorType& mask = in[a.mask];
    KILN_CHECK(mask.dtype == DType::boolean || mask.dtype == q.dtype,
               "{}: expected a bool mask or one of q's dtype {}, got {}", name, dtypeName(q.dtype), typesStr(in));
    Shape scores = batch;
    scores.insert(scores.end(), {lq, lk});
    KILN_CHECK(mask.rank() <= static_cast<int>(scores.size()) && broadcastShapes(mask.shape, scores) == scores,
               "{}: mask {} does not broadcast to the weights' shape {}", name, mask.str(), shapeStr(scores));
  }
  if (a.seed >= 0)
    for (int i : {a.seed, a.seed + 1})
      KILN_CHECK(in[i].dtype == DType::i64 && in[i].rank() == 0,
                 "{}: expected dropout's seed and offset as 0-d i64, got {}", name, typesStr(in));
  if (op == Op::attention) return {q.dtype, out, q.device};
  const int64_t count = [&] {
    int64_t n = 1;
    for (int64_t s : batch) n *= s;
    return n * (lq * e + lk * e + lk * ev);
  }();
  return {q.dtype, {count}, q.device};
}
}  // namespace detail

}  // namespace kiln::ir
