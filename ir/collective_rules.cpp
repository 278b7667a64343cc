// The type rules of the collectives: all_reduce keeps its operand's type;
// its attributes name a process group (an id >= 0) and a reduction of
// PyTorch's ReduceOp, avg for floating-point dtypes only.
#include "ir/collective_rules.h"

#include <array>
#include <string>

#include "runtime/error.h"

namespace kiln::ir {

namespace {
constexpr std::array<std::string_view, 5> kReduceOps = {"sum", "avg", "min", "max", "product"};
}  // namespace

int64_t collectiveGroup(const Attributes& attrs, std::string_view op) {
  const int64_t group = intAttr(attrs, "group", op);
  KILN_CHECK(group >= 0, "{}: attribute 'group' must be a process group id (>= 0), got {}", op, group);
  return group;
}

std::string_view collectiveReduceOp(const Attributes& attrs, std::string_view op) {
  auto it = attrs.find("op");
  KILN_CHECK(it != attrs.end(), "{}: missing attribute 'op' (one of sum, avg, min, max, product)", op);
  const auto* name = std::get_if<std::string>(&it->second);
  KILN_CHECK(name != nullptr, "{}: attribute 'op' must be a string (one of sum, avg, min, max, product), got {}", op,
             attrStr(it->second));
  for (std::string_view known : kReduceOps)
    if (*name == known) return known;
  fail("{}: attribute 'op' must be one of sum, avg, min, max, product, got \"{}\"", op, *name);
}

namespace detail {

TensorType inferCollective(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  // Not a switch: only collectives reach here (inferType dispatches on the kind).
  KILN_ASSERT(op == Op::all_reduce, "inferCollective called for {}", opName(op));
  const std::string_view name = opName(op);
  collectiveGroup(attrs, name);
  const std::string_view reduce = collectiveReduceOp(attrs, name);
  KILN_CHECK(reduce != "avg" || isFloatingPoint(in[0].dtype),
             "{}: op avg takes a floating-point dtype (f32, f64, f16, bf16), got {}", name, in[0].str());
  for (const auto& [key, value] : attrs)
    KILN_CHECK(key == "group" || key == "op", "{}: unknown attribute '{}' (it takes group and op)", name, key);
  return in[0];
}

}  // namespace detail

}  // namespace kiln::ir
