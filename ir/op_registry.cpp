// The op table generated from ir/Ops.def and the result-type rules of each
// op: elementwise ops take operands of one dtype (the frontend casts them
// there), some only numbers (not bool) or only floating-point dtypes, and
// their results have that dtype, except cast (attribute `dtype`) and the
// comparisons (bool). The reductions' rules are in ir/reduction_rules.cpp.
#include "ir/op_registry.h"

#include <array>

#include "ir/library_rules.h"
#include "ir/reduction_rules.h"
#include "runtime/error.h"

namespace kiln::ir {

namespace {
constexpr OpInfo kOps[] = {
#define KILN_OP(id, text, kind, arity) {Op::id, text, OpKind::kind, arity},
#include "ir/Ops.def"
};

std::string typesStr(std::span<const TensorType> types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i)
    s += (i == 0 ? "" : i + 1 == types.size() ? " and " : ", ") + types[i].str();
  return s;
}

/// The dtype attribute `name` of `op`.
DType dtypeAttr(const Attributes& attrs, const char* name, std::string_view op) {
  auto it = attrs.find(name);
  KILN_CHECK(it != attrs.end(), "{}: missing attribute '{}'", op, name);
  const DType* d = std::get_if<DType>(&it->second);
  KILN_CHECK(d, "{}: attribute '{}' must be a dtype, got {}", op, name, attrStr(it->second));
  return *d;
}

bool isComparison(Op op) {
  return op == Op::eq || op == Op::ne || op == Op::lt || op == Op::le || op == Op::gt || op == Op::ge;
}

/// The dtypes each elementwise op takes (the operand dtype; `where`'s values).
enum class Takes { any, numbers, floats };
Takes takes(Op op) {
  switch (op) {
    case Op::div:
    case Op::exp:
    case Op::log:
    case Op::sqrt:
    case Op::tanh:
    case Op::sigmoid:
    case Op::dropout:
    case Op::rsqrt:
    case Op::sin:
    case Op::cos:
    case Op::erf:
    case Op::silu:
    case Op::gelu: return Takes::floats;
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::neg:
    case Op::relu:
    case Op::abs:
    case Op::pow: return Takes::numbers;
    case Op::maximum:
    case Op::minimum:
    case Op::cast:
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge:
    case Op::where:
    case Op::constant:
    case Op::reshape:
    case Op::transpose:
    case Op::slice:
    case Op::expand:
    case Op::cat:
    case Op::sum:
    case Op::mean:
    case Op::amax:
    case Op::amin:
    case Op::argmax:
    case Op::var:
    case Op::matmul:
    case Op::index_select:
    case Op::index_add:
    case Op::fusion: return Takes::any;
  }
  return Takes::any;
}

/// The result dtype of elementwise `op` on `in`, after its dtype checks.
DType elementwiseDType(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  const std::string_view name = opName(op);
  if (op == Op::cast) return dtypeAttr(attrs, "dtype", name);
  // `where` takes a bool condition and two values of one dtype.
  std::span<const TensorType> operands = in;
  if (op == Op::where) {
    KILN_CHECK(in[0].dtype == DType::boolean, "where: expected a bool condition, got {}", typesStr(in));
    operands = in.subspan(1);
  }
  for (const TensorType& t : operands.subspan(1))
    KILN_CHECK(t.dtype == operands[0].dtype, "{}: expected {} of the same dtype, got {}", name,
               op == Op::where ? "both values" : "all tensors", typesStr(in));
  const DType dtype = operands[0].dtype;
  switch (takes(op)) {
    case Takes::any: break;
    case Takes::numbers:
      KILN_CHECK(dtype != DType::boolean,
                 "{}: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got {}",
                 name, typesStr(in));
      break;
    case Takes::floats:
      KILN_CHECK(isFloatingPoint(dtype), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}", name,
                 typesStr(in));
      break;
  }
  return isComparison(op) ? DType::boolean : dtype;
}

TensorType inferElementwise(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  const std::string_view name = opName(op);
  for (const TensorType& t : in.subspan(1))
    KILN_CHECK(t.device == in[0].device, "{}: expected all tensors on the same device, got {}", name, typesStr(in));
  const DType dtype = elementwiseDType(op, in, attrs);
  if (op == Op::gelu) geluApproximate(attrs);  // checks the attribute
  Shape shape = in[0].shape;
  for (const TensorType& t : in.subspan(1)) {
    auto b = broadcastShapes(shape, t.shape);
    KILN_CHECK(b.has_value(), "{}: shapes do not broadcast, got {}", name, typesStr(in));
    shape = *b;
  }
  return {dtype, shape, in[0].device};
}
/// dropout(x, seed, offset): x's type; seed and offset are 0-d i64 on x's device.
TensorType inferDropout(std::span<const TensorType> in, const Attributes& attrs) {
  dropoutP(attrs);
  KILN_CHECK(isFloatingPoint(in[0].dtype), "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got {}",
             typesStr(in));
  for (const TensorType& t : in.subspan(1)) {
    KILN_CHECK(t.device == in[0].device, "dropout: expected all tensors on the same device, got {}", typesStr(in));
    KILN_CHECK(t.dtype == DType::i64 && t.rank() == 0, "dropout: expected seed and offset of type i64[], got {}",
               typesStr(in));
  }
  return in[0];
}

TensorType inferReshape(std::span<const TensorType> in, const Attributes& attrs) {
  const auto& shape = intListAttr(attrs, "shape", "reshape");
  for (int64_t d : shape) KILN_CHECK(d >= 0, "reshape: negative dimension in shape {}", shapeStr(shape));
  KILN_CHECK(numel(shape) == in[0].numel(), "reshape: cannot reshape {} ({} elements) to {} ({} elements)", in[0].str(),
             in[0].numel(), shapeStr(shape), numel(shape));
  return {in[0].dtype, shape, in[0].device};
}

TensorType inferTranspose(std::span<const TensorType> in, const Attributes& attrs) {
  const auto& perm = intListAttr(attrs, "perm", "transpose");
  const int rank = in[0].rank();
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < rank && !seen[p];
    if (valid) seen[p] = true;
  }
  KILN_CHECK(valid, "transpose: perm {} is not a permutation of the {} dimensions of {}", shapeStr(perm), rank,
             in[0].str());
  Shape shape(rank);
  for (int i = 0; i < rank; ++i) shape[i] = in[0].shape[perm[i]];
  return {in[0].dtype, shape, in[0].device};
}

TensorType inferSlice(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const int64_t dim = intAttr(attrs, "dim", "slice"), start = intAttr(attrs, "start", "slice");
  const int64_t end = intAttr(attrs, "end", "slice"), step = intAttr(attrs, "step", "slice");
  KILN_CHECK(dim >= 0 && dim < x.rank(), "slice: dim {} out of range for {}", dim, x.str());
  const int64_t size = x.shape[dim];
  KILN_CHECK(0 <= start && start <= end && end <= size && step >= 1,
             "slice: expected 0 <= start <= end <= {} and step >= 1, got start = {}, end = {}, step = {} for "
             "dimension {} of {}",
             size, start, end, step, dim, x.str());
  Shape shape = x.shape;
  shape[dim] = (end - start + step - 1) / step;
  return {x.dtype, shape, x.device};
}

TensorType inferExpand(std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const auto& shape = intListAttr(attrs, "shape", "expand");
  bool valid = shape.size() >= x.shape.size();
  for (int64_t d : shape) valid = valid && d >= 0;
  const size_t lead = valid ? shape.size() - x.shape.size() : 0;
  for (size_t i = 0; valid && i < x.shape.size(); ++i) valid = x.shape[i] == 1 || x.shape[i] == shape[lead + i];
  KILN_CHECK(valid, "expand: cannot expand {} to {}", x.str(), shapeStr(shape));
  return {x.dtype, shape, x.device};
}

TensorType inferCat(std::span<const TensorType> in, const Attributes& attrs) {
  KILN_CHECK(!in.empty(), "cat: expected at least 1 input, got 0");
  const int64_t dim = intAttr(attrs, "dim", "cat");
  KILN_CHECK(dim >= 0 && dim < in[0].rank(), "cat: dim {} out of range for {}", dim, in[0].str());
  Shape shape = in[0].shape;
  shape[dim] = 0;
  for (const TensorType& t : in) {
    KILN_CHECK(t.dtype == in[0].dtype, "cat: expected inputs of one dtype, got {}", typesStr(in));
    KILN_CHECK(t.device == in[0].device, "cat: expected all tensors on the same device, got {}", typesStr(in));
    bool same = t.rank() == in[0].rank();
    for (int d = 0; same && d < t.rank(); ++d) same = d == dim || t.shape[d] == in[0].shape[d];
    KILN_CHECK(same, "cat: expected equal sizes outside dimension {}, got {}", dim, typesStr(in));
    shape[dim] += t.shape[dim];
  }
  return {in[0].dtype, shape, in[0].device};
}
}  // namespace

double dropoutP(const Attributes& attrs) {
  const double p = floatAttr(attrs, "p", "dropout");
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);  // NaN fails too
  return p;
}

const int kNumOps = static_cast<int>(std::size(kOps));

int geluApproximate(const Attributes& attrs) {
  const int64_t a = intAttr(attrs, "approximate", "gelu", 0);
  KILN_CHECK(a == 0 || a == 1, "gelu: attribute 'approximate' must be 0 (erf) or 1 (tanh), got {}", a);
  return static_cast<int>(a);
}

const OpInfo& opInfo(Op op) {
  auto i = static_cast<size_t>(op);
  KILN_ASSERT(i < std::size(kOps) && kOps[i].op == op, "op table out of step");
  return kOps[i];
}

std::optional<Op> parseOp(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (info.name == name) return info.op;
  return std::nullopt;
}

std::span<const OpInfo> allOps() { return kOps; }

TensorType inferType(Op op, std::span<const TensorType> inputs, const Attributes& attrs) {
  const OpInfo& info = opInfo(op);
  KILN_CHECK(info.arity < 0 || static_cast<int>(inputs.size()) == info.arity, "{}: expected {} input{}, got {}",
             info.name, info.arity, info.arity == 1 ? "" : "s", inputs.size());
  switch (op) {
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::maximum:
    case Op::minimum:
    case Op::pow:
    case Op::neg:
    case Op::relu:
    case Op::exp:
    case Op::log:
    case Op::sqrt:
    case Op::tanh:
    case Op::sigmoid:
    case Op::abs:
    case Op::rsqrt:
    case Op::sin:
    case Op::cos:
    case Op::erf:
    case Op::silu:
    case Op::gelu:
    case Op::cast:
    case Op::eq:
    case Op::ne:
    case Op::lt:
    case Op::le:
    case Op::gt:
    case Op::ge:
    case Op::where: return inferElementwise(op, inputs, attrs);
    case Op::dropout: return inferDropout(inputs, attrs);
    case Op::reshape: return inferReshape(inputs, attrs);
    case Op::transpose: return inferTranspose(inputs, attrs);
    case Op::slice: return inferSlice(inputs, attrs);
    case Op::expand: return inferExpand(inputs, attrs);
    case Op::cat: return inferCat(inputs, attrs);
    case Op::sum:
    case Op::mean:
    case Op::amax:
    case Op::amin:
    case Op::argmax:
    case Op::var: return detail::inferReduction(op, inputs, attrs);
    case Op::matmul:
    case Op::index_select:
    case Op::index_add: return detail::inferLibrary(op, inputs, attrs);
    case Op::constant:
    case Op::fusion: break;
  }
  KILN_ASSERT(false, "inferType called for {}, whose type is given by its creator", info.name);
  return {};
}

}  // namespace kiln::ir
