// The result-type rules of the ops of ir/Ops.def (whose table and fact
// queries are ir/op_registry.h): elementwise ops take operands of one dtype
// (the frontend casts them there) of their dtype class, and their results
// have that dtype, except cast (attribute `dtype`) and the comparisons
// (bool); movement ops' rules are here too. The reductions' rules are in
// ir/reduction_rules.cpp, the library calls' in ir/library_rules.cpp.
#include "ir/op_registry.h"

#include <array>

#include "ir/collective_rules.h"
#include "ir/library_rules.h"
#include "ir/reduction_rules.h"
#include "runtime/error.h"

namespace kiln::ir {

namespace {
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
  checkDTypeClass(op, dtype, typesStr(in), " (bool takes cast, comparisons, where, maximum and minimum)");
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
/// An op that draws (usesElementIndex) takes its draw's seed and offset
/// last, 0-d i64 on the device of the others. dropout(x, seed, offset)
/// gives x's type; rand and randn (no other operand) the type of their
/// attributes `dtype` and `shape`, on the seed's device.
TensorType inferDraw(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  const std::string_view name = opName(op);
  KILN_ASSERT(in.size() >= 2, "{} without its seed and offset", name);
  if (op == Op::dropout) dropoutP(attrs);
  const std::span<const TensorType> data = in.first(in.size() - 2);
  KILN_ASSERT(data.size() <= 1, "{} draws for {} operands", name, data.size());
  TensorType out = data.empty() ? TensorType{dtypeAttr(attrs, "dtype", name), {}, in[0].device} : data[0];
  if (data.empty()) {
    out.shape = intListAttr(attrs, "shape", name);
    for (int64_t d : out.shape) KILN_CHECK(d >= 0, "{}: negative dimension in shape {}", name, shapeStr(out.shape));
    checkDTypeClass(op, out.dtype, std::string(dtypeName(out.dtype)));
  } else {
    checkDTypeClass(op, out.dtype, typesStr(in));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    KILN_CHECK(in[i].device == in[0].device, "{}: expected all tensors on the same device, got {}", name, typesStr(in));
    KILN_CHECK(i < data.size() || (in[i].dtype == DType::i64 && in[i].rank() == 0),
               "{}: expected seed and offset of type i64[], got {}", name, typesStr(in));
  }
  return out;
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

/// The rule of each movement op (not a switch: only movement ops get here).
TensorType inferMovement(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  if (op == Op::reshape) return inferReshape(in, attrs);
  if (op == Op::transpose) return inferTranspose(in, attrs);
  if (op == Op::slice) return inferSlice(in, attrs);
  if (op == Op::expand) return inferExpand(in, attrs);
  if (op == Op::cat) return inferCat(in, attrs);
  KILN_ASSERT(false, "{} is a movement op without a type rule", opName(op));
  return {};
}
}  // namespace

double dropoutP(const Attributes& attrs) {
  const double p = floatAttr(attrs, "p", "dropout");
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);  // NaN fails too
  return p;
}

void checkDTypeClass(Op op, DType dtype, std::string_view got, std::string_view note) {
  switch (dtypeClass(op)) {
    case DTypeClass::any: break;
    case DTypeClass::numbers:
      KILN_CHECK(dtype != DType::boolean, "{}: dtype bool is not supported{}, got {}", opName(op), note, got);
      break;
    case DTypeClass::floats:
      KILN_CHECK(isFloatingPoint(dtype), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}",
                 opName(op), got);
      break;
  }
}

int geluApproximate(const Attributes& attrs) {
  const int64_t a = intAttr(attrs, "approximate", "gelu", 0);
  KILN_CHECK(a == 0 || a == 1, "gelu: attribute 'approximate' must be 0 (erf) or 1 (tanh), got {}", a);
  return static_cast<int>(a);
}

std::optional<Op> parseOp(std::string_view name) {
  for (const OpInfo& info : allOps())
    if (info.name == name) return info.op;
  return std::nullopt;
}

TensorType inferType(Op op, std::span<const TensorType> inputs, const Attributes& attrs) {
  const OpInfo& info = opInfo(op);
  KILN_CHECK(info.arity < 0 || static_cast<int>(inputs.size()) == info.arity, "{}: expected {} input{}, got {}",
             info.name, info.arity, info.arity == 1 ? "" : "s", inputs.size());
  switch (info.kind) {
    case OpKind::elementwise:
      return usesElementIndex(op) ? inferDraw(op, inputs, attrs) : inferElementwise(op, inputs, attrs);
    case OpKind::movement: return inferMovement(op, inputs, attrs);
    case OpKind::reduction: return detail::inferReduction(op, inputs, attrs);
    case OpKind::library: return detail::inferLibrary(op, inputs, attrs);
    case OpKind::collective: return detail::inferCollective(op, inputs, attrs);
    case OpKind::constant:
    case OpKind::control: break;
  }
  KILN_ASSERT(false, "inferType called for {}, whose type is given by its creator", info.name);
  return {};
}

}  // namespace kiln::ir
