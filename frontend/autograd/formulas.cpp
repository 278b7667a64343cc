// Gradient formulas of the registry ops (docs/ops.md, column "gradient").
//
// Each formula follows PyTorch's derivatives.yaml, in the same order of
// operations where that decides the rounding (div's other: -g * ((a / b) /
// b); sigmoid: g * (1 - y) * y), so that gradients can be compared with
// PyTorch's at tight tolerances. Formulas return gradients in the dtype and
// broadcast shape the op computed in; attach() sums and converts them to
// each input's shape and dtype.
#include "frontend/autograd/formulas.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "frontend/autograd/function.h"
#include "frontend/dispatch.h"
#include "frontend/indexing.h"
#include "frontend/linalg.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "ir/conv.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"

namespace kiln::autograd {

namespace {
using detail::Operand;
using ir::Op;

/// An op's operands as its formula sees them: scalars as they were, tensors
/// saved (Note [Saved tensors]) only when the formula reads them.
class Args {
 public:
  Args(std::span<const Operand> operands, std::string node) : node_(std::move(node)) {
    for (const Operand& o : operands) operands_.push_back(o.isScalar ? o : Operand(Tensor()));
    saved_.resize(operands.size());
    originals_.assign(operands.begin(), operands.end());
  }
  /// Saves operand `i` (a tensor) for the formula.
  void save(size_t i) {
    if (!originals_[i].isScalar) saved_[i] = SavedTensor(originals_[i].tensor);
  }
  /// Whether operand `i` is a tensor that requires grad (its gradient is wanted).
  bool needs(size_t i) const { return !originals_[i].isScalar && originals_[i].tensor.requiresGrad(); }
  /// Operand i: its scalar, or the saved tensor.
  Operand operator[](size_t i) const {
    if (operands_[i].isScalar) return operands_[i];
    return saved_[i].unpack(node_);
  }
  /// Operand i as recorded, for what the formula decides when it is made
  /// (a layout); not for the backward, which reads saved operands only.
  const Operand& original(size_t i) const { return originals_[i]; }
  const std::string& node() const { return node_; }
  size_t size() const { return originals_.size(); }
  void dropOriginals() { originals_.clear(); }

 private:
  std::vector<Operand> operands_;
  std::vector<SavedTensor> saved_;
  std::vector<Operand> originals_;
  std::string node_;
};

/// g with the reduced dims of a reduction of an input of shape `in` put back
/// as size 1 (when the reduction dropped them), ready to broadcast.
Tensor unreduce(const Tensor& g, Op op, const ir::TensorType& in, const ir::Attributes& attrs) {
  const ir::ReductionShape rs = ir::reductionShape(op, in, attrs);
  if (rs.keepdim) return g;
  return g.reshape(ir::reducedShape(in.shape, rs.dims, true));
}

int64_t reducedCount(Op op, const ir::TensorType& in, const ir::Attributes& attrs) {
  int64_t n = 1;
  for (int d : ir::reductionShape(op, in, attrs).dims) n *= in.shape[d];
  return n;
}

std::string nodeName(Op op) {
  std::string name(ir::opName(op));
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out + "Backward";
}

/// The formula for `op`: gradients of all operands from g, or nullptr when
/// the op has no gradient. `args` saves what the formula reads.
using Formula = std::function<std::vector<Tensor>(const Tensor& g)>;

Formula formulaFor(Op op, const ir::Attributes& attrs, std::shared_ptr<Args> a, const Tensor& result,
                   const ir::TensorType& in0) {
  switch (op) {
    case Op::add: return [](const Tensor& g) { return std::vector<Tensor>{g, g}; };
    case Op::sub: return [](const Tensor& g) { return std::vector<Tensor>{g, neg(g)}; };
    // Each operand is saved only when the other's gradient needs it (as
    // PyTorch), so that `y.mul_(2)` does not save y and then overwrite it.
    case Op::mul: {
      const bool da = a->needs(0), db = a->needs(1);
      if (da) a->save(1);
      if (db) a->save(0);
      return [a, da, db](const Tensor& g) {
        return std::vector<Tensor>{da ? mul(g, (*a)[1]) : Tensor(), db ? mul(g, (*a)[0]) : Tensor()};
      };
    }
    case Op::div: {
      const bool da = a->needs(0), db = a->needs(1);
      if (da || db) a->save(1);
      if (db) a->save(0);
      return [a, da, db](const Tensor& g) {
        const Operand y = (*a)[1];
        return std::vector<Tensor>{da ? div(g, y) : Tensor(), db ? mul(neg(g), div(div((*a)[0], y), y)) : Tensor()};
      };
    }
    case Op::maximum:
    case Op::minimum: {
      a->save(0), a->save(1);
      const bool isMax = op == Op::maximum;
      // PyTorch: where(a == b, g / 2, g), zero where the other side wins;
      // NaN on either side passes g to both.
      return [a, isMax](const Tensor& g) {
        const Operand x = (*a)[0], y = (*a)[1];
        const Tensor split = where(eq(x, y), div(g, 2.0), g);
        const Tensor xLoses = isMax ? lt(x, y) : gt(x, y);
        const Tensor yLoses = isMax ? gt(x, y) : lt(x, y);
        return std::vector<Tensor>{where(xLoses, 0.0, split), where(yLoses, 0.0, split)};
      };
    }
    case Op::neg: return [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; };
    case Op::relu: {
      auto y = std::make_shared<SavedTensor>(result);
      // PyTorch's threshold_backward: 0 where y <= 0, else g (NaN passes g).
      return [y, a](const Tensor& g) { return std::vector<Tensor>{where(le(y->unpack(a->node()), 0.0), 0.0, g)}; };
    }
    case Op::exp: {
      auto y = std::make_shared<SavedTensor>(result);
      return [y, a](const Tensor& g) { return std::vector<Tensor>{mul(g, y->unpack(a->node()))}; };
    }
    case Op::log: a->save(0); return [a](const Tensor& g) { return std::vector<Tensor>{div(g, (*a)[0])}; };
    case Op::sqrt: {
      auto y = std::make_shared<SavedTensor>(result);
      return [y, a](const Tensor& g) { return std::vector<Tensor>{div(g, mul(y->unpack(a->node()), 2.0))}; };
    }
    case Op::tanh: {
      auto y = std::make_shared<SavedTensor>(result);
      return [y, a](const Tensor& g) {
        const Tensor t = y->unpack(a->node());
        return std::vector<Tensor>{mul(g, sub(1.0, mul(t, t)))};
      };
    }
    case Op::sigmoid: {
      auto y = std::make_shared<SavedTensor>(result);
      return [y, a](const Tensor& g) {
        const Tensor s = y->unpack(a->node());
        return std::vector<Tensor>{mul(mul(g, sub(1.0, s)), s)};
      };
    }
    case Op::pow: {
      // PyTorch's pow_backward_self and pow_backward_exponent: 0 where the
      // exponent is 0, else g * (y * x^(y - 1)); 0 where x = 0 and y >= 0,
      // else g * (x^y log x). A scalar base has no gradient, but its log is
      // needed for the exponent's: computed in the result's dtype.
      const bool dx = a->needs(0), dy = a->needs(1);
      a->save(0), a->save(1);
      auto y = std::make_shared<SavedTensor>(result);
      const DType dtype = result.dtype();
      return [a, y, dx, dy, dtype](const Tensor& g) {
        const Operand x = (*a)[0], e = (*a)[1];
        Tensor gx, gy;
        if (dx && e.isScalar) {  // then x is a tensor
          const Operand eMinus1 = e.kind == Operand::Kind::floating ? Operand(e.scalar - 1) : Operand(e.intScalar - 1);
          gx = e.scalar == 0 ? zeros(g.shape(), g.dtype(), g.device()) : mul(g, mul(e, pow(x, eMinus1)));
        } else if (dx) {
          gx = where(eq(e.tensor, 0.0), 0.0, mul(g, mul(e, pow(x, sub(e.tensor, 1.0)))));
        }
        if (dy) {  // e is a tensor
          const Tensor logX = x.isScalar ? log(full({}, x.scalar, dtype, g.device())) : log(x.tensor);
          const Tensor xZero = x.isScalar ? full({}, x.scalar == 0, DType::boolean, g.device()) : eq(x.tensor, 0.0);
          gy = mul(g, where(minimum(xZero, ge(e.tensor, 0.0)), 0.0, mul(y->unpack(a->node()), logX)));
        }
        return std::vector<Tensor>{gx, gy};
      };
    }
    case Op::abs:
      a->save(0);
      // g * sign(x), sign(0) = sign(NaN) = 0, as PyTorch's sgn.
      return [a](const Tensor& g) {
        const Tensor x = (*a)[0].tensor;
        return std::vector<Tensor>{mul(g, sub(gt(x, 0.0).to(g.dtype()), lt(x, 0.0).to(g.dtype())))};
      };
    case Op::rsqrt: {
      auto y = std::make_shared<SavedTensor>(result);
      // PyTorch: -0.5 * g * y^3, with y^3 = y * y * y.
      return [y, a](const Tensor& g) {
        const Tensor r = y->unpack(a->node());
        return std::vector<Tensor>{mul(mul(g, -0.5), mul(mul(r, r), r))};
      };
    }
    case Op::sin: a->save(0); return [a](const Tensor& g) { return std::vector<Tensor>{mul(g, cos((*a)[0].tensor))}; };
    case Op::cos:
      a->save(0);
      return [a](const Tensor& g) { return std::vector<Tensor>{mul(g, neg(sin((*a)[0].tensor)))}; };
    case Op::erf:
      a->save(0);
      // PyTorch: 2/sqrt(pi) * exp(-(x * x)) * g.
      return [a](const Tensor& g) {
        const Tensor x = (*a)[0].tensor;
        return std::vector<Tensor>{mul(mul(exp(neg(mul(x, x))), 1.1283791670955126), g)};
      };
    case Op::silu:
      a->save(0);
      // PyTorch's silu_backward: g * s * (1 + x * (1 - s)), s = sigmoid(x).
      return [a](const Tensor& g) {
        const Tensor x = (*a)[0].tensor, s = sigmoid(x);
        return std::vector<Tensor>{mul(mul(g, s), add(1.0, mul(x, sub(1.0, s))))};
      };
    case Op::gelu: {
      a->save(0);
      const bool tanhForm = ir::geluApproximate(attrs) == 1;
      // PyTorch's GeluBackward kernels, step by step.
      return [a, tanhForm](const Tensor& g) {
        const Tensor x = (*a)[0].tensor;
        if (!tanhForm) {
          const Tensor cdf = mul(add(erf(mul(x, 0.70710678118654752440)), 1.0), 0.5);
          const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 0.39894228040143267794);  // 1/sqrt(2 pi)
          return std::vector<Tensor>{mul(g, add(cdf, mul(x, pdf)))};
        }
        const double beta = 0.7978845608028654, kappa = 0.044715;
        const Tensor xx = mul(x, x);
        const Tensor t = tanh(mul(add(x, mul(mul(xx, x), kappa)), beta));
        const Tensor left = mul(x, 0.5), right = add(t, 1.0);
        const Tensor leftDerivative = mul(right, 0.5);
        const Tensor innerDerivative = mul(add(mul(xx, 3.0 * kappa), 1.0), beta);
        const Tensor rightDerivative = mul(mul(left, sub(1.0, mul(t, t))), innerDerivative);
        return std::vector<Tensor>{mul(g, add(leftDerivative, rightDerivative))};
      };
    }
    case Op::softplus: {
      a->save(0);
      const ir::formulas::SoftplusAttrs s = ir::formulas::softplusAttrs(attrs);
      // PyTorch's softplus_backward: g where x beta > threshold, else
      // g * z / (z + 1) with z = exp(x beta) (g * sigmoid(x beta)).
      return [a, s](const Tensor& g) {
        const Tensor xb = mul((*a)[0].tensor, s.beta), z = exp(xb);
        return std::vector<Tensor>{where(gt(xb, s.threshold), g, div(mul(g, z), add(z, 1.0)))};
      };
    }
    case Op::cast: return [](const Tensor& g) { return std::vector<Tensor>{g}; };
    case Op::opt_barrier: return [](const Tensor& g) { return std::vector<Tensor>{g, Tensor()}; };
    // dropout's gradient is the same dropout of g: the same seed, offset and
    // p draw the same mask (Note [Dropout draws]), recomputed, never stored.
    // seed and offset (0-d i64, fresh per call) get no gradient.
    case Op::dropout:
      a->save(1), a->save(2);
      return [a, attrs](const Tensor& g) {
        return std::vector<Tensor>{detail::dispatch(Op::dropout, {g, (*a)[1], (*a)[2]}, attrs), Tensor(), Tensor()};
      };
    case Op::where:
      a->save(0);
      return [a](const Tensor& g) {
        const Tensor c = (*a)[0].tensor;
        return std::vector<Tensor>{Tensor(), where(c, g, 0.0), where(c, 0.0, g)};
      };
    case Op::sum:
      return [op, attrs, in0](const Tensor& g) {
        return std::vector<Tensor>{unreduce(g, op, in0, attrs).expand(in0.shape)};
      };
    case Op::mean:
      return [op, attrs, in0](const Tensor& g) {
        const double n = static_cast<double>(reducedCount(op, in0, attrs));
        return std::vector<Tensor>{div(unreduce(g, op, in0, attrs).expand(in0.shape), n)};
      };
    case Op::amax:
    case Op::amin: {
      a->save(0);
      auto y = std::make_shared<SavedTensor>(result);
      // PyTorch: g split evenly among the elements equal to the result.
      return [a, y, op, attrs, in0](const Tensor& g) {
        const ir::ReductionShape rs = ir::reductionShape(op, in0, attrs);
        std::vector<int64_t> dims(rs.dims.begin(), rs.dims.end());
        const Tensor mask = eq((*a)[0].tensor, unreduce(y->unpack(a->node()), op, in0, attrs));
        const Tensor count = sum(mask, dims, true);
        return std::vector<Tensor>{mul(div(unreduce(g, op, in0, attrs), count), mask)};
      };
    }
    case Op::var: {
      a->save(0);
      return [a, op, attrs, in0](const Tensor& g) {
        const ir::ReductionShape rs = ir::reductionShape(op, in0, attrs);
        std::vector<int64_t> dims(rs.dims.begin(), rs.dims.end());
        const double n = static_cast<double>(reducedCount(op, in0, attrs));
        const double correction = static_cast<double>(ir::intAttr(attrs, "correction", "var", 1));
        const Tensor x = (*a)[0].tensor;
        const Tensor centered = sub(x, mean(x, dims, true));
        return std::vector<Tensor>{mul(mul(unreduce(g, op, in0, attrs), 2.0 / (n - correction)), centered)};
      };
    }
    // Library calls. matmul: gA = g·Bᵀ, gB = Aᵀ·g over the broadcast batch,
    // which attach() sums back to each operand's batch dims.
    case Op::matmul: {
      const bool da = a->needs(0), db = a->needs(1);
      if (da) a->save(1);
      if (db) a->save(0);
      // As PyTorch's mm_mat1/mm_mat2_backward: an operand that is a
      // transposed contiguous matrix (linear's weight.t()) gets its gradient
      // computed transposed, (Bᵀ-shaped product)ᵀ, so that the gradient of
      // the matrix it views comes out contiguous, with no strided copy.
      auto transposedContiguous = [](const Tensor& t) {
        return t.dim() == 2 && !t.isContiguous() && t.stride(0) == 1 && t.stride(1) == t.size(0);
      };
      // (Only for a product of two matrices, where g is a matrix too.)
      const bool matrices = a->original(0).tensor.dim() == 2 && a->original(1).tensor.dim() == 2;
      const bool aT = da && matrices && transposedContiguous(a->original(0).tensor);
      const bool bT = db && matrices && transposedContiguous(a->original(1).tensor);
      return [a, da, db, aT, bT](const Tensor& g) {
        Tensor gA, gB;
        if (da) {
          const Tensor B = (*a)[1].tensor;
          gA = aT ? matmul(B, g.transpose(0, 1)).transpose(0, 1) : matmul(g, B.transpose(-1, -2));
        }
        if (db) {
          const Tensor A = (*a)[0].tensor;
          gB = bT ? matmul(g.transpose(0, 1), A).transpose(0, 1) : matmul(A.transpose(-1, -2), g);
        }
        return std::vector<Tensor>{gA, gB};
      };
    }
    // index_select: g added into zeros at the indices (repeats accumulate).
    case Op::index_select: {
      a->save(1);
      const int64_t dim = ir::intAttr(attrs, "dim", "index_select");
      return [a, dim, in0](const Tensor& g) {
        const Tensor zero = zeros(in0.shape, g.dtype(), g.device());
        return std::vector<Tensor>{indexAdd(zero, dim, (*a)[1].tensor, g), Tensor()};
      };
    }
    // index_add: g for x, the slices of g at the indices for the source.
    case Op::index_add: {
      const bool dsource = a->needs(2);
      if (dsource) a->save(1);
      const int64_t dim = ir::intAttr(attrs, "dim", "index_add");
      return [a, dim, dsource](const Tensor& g) {
        return std::vector<Tensor>{g, Tensor(), dsource ? indexSelect(g, dim, (*a)[1].tensor) : Tensor()};
      };
    }
    // attention: one attention_backward call computes the three gradients
    // (runtime/attention.h), each a view of its result. The mask and the
    // draw's seed and offset get none (kiln::scaledDotProductAttention
    // refuses a mask that requires grad).
    case Op::attention: {
      const int n = static_cast<int>(a->size());
      for (int i = 0; i < n; ++i) a->save(static_cast<size_t>(i));
      auto y = std::make_shared<SavedTensor>(result);
      return [a, y, attrs, n](const Tensor& g) {
        std::vector<Operand> operands = {(*a)[0], (*a)[1], (*a)[2], y->unpack(a->node()), g};
        for (int i = 3; i < n; ++i) operands.push_back((*a)[static_cast<size_t>(i)]);
        const Tensor flat = detail::dispatch(Op::attention_backward, std::move(operands), attrs);
        std::vector<Tensor> grads;
        int64_t at = 0;
        for (int i = 0; i < 3; ++i) {
          const Shape& shape = (*a)[static_cast<size_t>(i)].tensor.shape();
          const int64_t count = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
          grads.push_back(flat.narrow(0, at, count).view(shape));
          at += count;
        }
        grads.resize(static_cast<size_t>(n));
        return grads;
      };
    }
    // Convolutions (ir/conv.h): each of x, w, y from the other two.
    // conv2d: gx = conv_transpose2d(g, w), its output_padding the rows and
    // columns conv2d's floor dropped (below the stride), gw =
    // conv2d_backward_weight(x, g). conv_transpose2d (y = conv_transpose2d(x,
    // w) is the input of a convolution whose output is x): gx = conv2d(g,
    // w), gw = conv2d_backward_weight(g, x).
    case Op::conv2d:
    case Op::conv_transpose2d: {
      const bool transposed = op == Op::conv_transpose2d;
      const bool dx = a->needs(0), dw = a->needs(1);
      if (dx) a->save(1);
      if (dw) a->save(0);
      ir::ConvAttrs c = ir::convAttrs(op, attrs);
      const Shape& w = a->original(1).tensor.shape();
      c.kernel = {w[2], w[3]};
      if (!transposed)
        for (int d = 0; d < 2; ++d)
          c.outputPadding[d] = in0.shape[static_cast<size_t>(d + 2)] -
                               ir::convTransposeOutputSize(result.size(d + 2), c.kernel[d], c.stride[d], c.padding[d],
                                                           c.padding[d + 2], c.dilation[d], 0);
      return [a, dx, dw, c, transposed](const Tensor& g0) {
        const Tensor g = g0.contiguous();  // Note [Convolutions read contiguous operands] in frontend/conv.cpp
        const Op inputGradient = transposed ? Op::conv2d : Op::conv_transpose2d;
        Tensor gx, gw;
        if (dx) gx = detail::dispatch(inputGradient, {g, (*a)[1]}, ir::convAttributes(inputGradient, c));
        if (dw) {
          std::vector<Operand> xy = {(*a)[0], g};
          if (transposed) std::swap(xy[0], xy[1]);
          gw = detail::dispatch(Op::conv2d_backward_weight, std::move(xy),
                                ir::convAttributes(Op::conv2d_backward_weight, c));
        }
        return std::vector<Tensor>{gx, gw};
      };
    }
    // No gradient: integer or bool results, random fills and constants.
    case Op::attention_backward:      // not differentiable twice: Note [Flash attention on the CPU]
    case Op::conv2d_backward_weight:  // not differentiable twice (docs/convolution.md)
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge:
    case Op::argmax:
    case Op::rand:
    case Op::randn:
    case Op::constant: return nullptr;
    // Not dispatched: views record movementBackward, cat its own node, and
    // fusion nodes exist only after passes.
    case Op::reshape:
    case Op::transpose:
    case Op::slice:
    case Op::expand:
    case Op::cat:
    case Op::all_reduce:  // frontend/distributed.cpp builds it; its result does not require grad
    case Op::fusion: break;
  }
  KILN_ASSERT(false, "autograd: {} is not recorded through dispatch()", ir::opName(op));
  return nullptr;
}

/// Zeros of `shape` except the elements start, start + step, ... of dim
/// `d`, which are g: slice's backward, as cats so that it also traces.
Tensor sliceBackward(const Tensor& g, const Shape& in, int64_t d, int64_t start, int64_t end, int64_t step) {
  Tensor spread = g;
  const int64_t n = g.shape()[d];
  if (step > 1 && n > 0) {
    Shape gaps = g.shape();
    gaps.insert(gaps.begin() + d + 1, step - 1);
    Tensor wide = cat({g.unsqueeze(d + 1), zeros(gaps, g.dtype(), g.device())}, d + 1);
    Shape flat = g.shape();
    flat[d] = n * step;
    spread = wide.reshape(flat).narrow(d, 0, std::min(n * step, end - start));
  }
  std::vector<Tensor> parts;
  auto zerosAlong = [&](int64_t size) {
    Shape s = in;
    s[d] = size;
    return zeros(s, g.dtype(), g.device());
  };
  if (start > 0) parts.push_back(zerosAlong(start));
  parts.push_back(spread);
  const int64_t after = in[d] - start - spread.shape()[d];
  if (after > 0) parts.push_back(zerosAlong(after));
  return parts.size() == 1 ? spread : cat(parts, d);
}

}  // namespace

void recordOp(Op op, std::span<const Operand> operands, const ir::Attributes& attrs, const Tensor& result) {
  std::vector<Tensor> inputs;
  std::vector<size_t> positions;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].isScalar) continue;
    inputs.push_back(operands[i].tensor);
    positions.push_back(i);
  }
  if (!ir::isDifferentiable(op) || !isFloatingPoint(result.dtype()) || !needsGrad(inputs)) return;
  auto args = std::make_shared<Args>(operands, nodeName(op));
  Formula f = formulaFor(op, attrs, args, result, inputs.at(0).type());
  args->dropOriginals();
  if (!f) return;
  attach(args->node(), inputs, std::span<const Tensor>(&result, 1),
         [f = std::move(f), positions](const std::vector<Tensor>& grads) {
           std::vector<Tensor> all = f(grads.at(0));
           std::vector<Tensor> out;
           for (size_t p : positions) out.push_back(all.at(p));
           return out;
         });
}

Tensor movementBackward(Op op, const ir::Attributes& attrs, const Shape& in, const Tensor& g) {
  if (op == Op::reshape) return g.reshape(in);
  if (op == Op::transpose) {
    const std::vector<int64_t>& perm = ir::intListAttr(attrs, "perm", "transpose");
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
    return g.permute(inverse);
  }
  if (op == Op::slice)
    return sliceBackward(g, in, ir::intAttr(attrs, "dim", "slice"), ir::intAttr(attrs, "start", "slice"),
                         ir::intAttr(attrs, "end", "slice"), ir::intAttr(attrs, "step", "slice"));
  KILN_ASSERT(op == Op::expand, "movementBackward: {} is not a view op", ir::opName(op));
  return sumToShape(g, in);
}

}  // namespace kiln::autograd
