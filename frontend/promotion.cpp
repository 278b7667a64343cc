// Type promotion (frontend/promotion.h), following c10's promoteTypes and
// at::native::result_type.
#include "frontend/promotion.h"

#include "runtime/error.h"

namespace kiln::detail {

namespace {
enum class Category : uint8_t { none, boolean, integer, floating };

Category category(DType d) {
  if (d == DType::boolean) return Category::boolean;
  return isFloatingPoint(d) ? Category::floating : Category::integer;
}

/// A running promotion over one group; `none` while the group is empty.
struct Group {
  bool any = false;
  DType dtype = DType::boolean;
  void add(DType d) {
    dtype = any ? promoteTypes(dtype, d) : d;
    any = true;
  }
  Category cat() const { return any ? category(dtype) : Category::none; }
};

/// c10's combine_categories: `higher` (the stronger group) wins unless
/// `lower` is of a higher category, in which case the two promote.
Group combine(Group higher, Group lower) {
  if (!higher.any) return lower;
  if (!lower.any) return higher;
  if (lower.cat() > higher.cat()) higher.dtype = promoteTypes(higher.dtype, lower.dtype);
  return higher;
}
}  // namespace

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  const bool af = isFloatingPoint(a), bf = isFloatingPoint(b);
  if (!af && !bf) return DType::i64;  // i32 with i64
  if (!af) return b;                  // integer with floating
  if (!bf) return a;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;  // two of f16, bf16, f32 that differ
}

DType resultType(std::span<const PromotionOperand> operands) {
  KILN_ASSERT(!operands.empty(), "resultType of no operands");
  Group dimensioned, zeroDim, scalar;
  for (const PromotionOperand& o : operands) {
    switch (o.participant) {
      case Participant::dimensioned: dimensioned.add(o.dtype); break;
      case Participant::zeroDim: zeroDim.add(o.dtype); break;
      case Participant::scalar: scalar.add(o.dtype); break;
    }
  }
  return combine(dimensioned, combine(zeroDim, scalar)).dtype;
}

bool isFloatOnly(ir::Op op) {
  switch (op) {
    case ir::Op::div:
    case ir::Op::exp:
    case ir::Op::log:
    case ir::Op::sqrt:
    case ir::Op::tanh:
    case ir::Op::sigmoid:
    case ir::Op::rsqrt:
    case ir::Op::sin:
    case ir::Op::cos:
    case ir::Op::erf:
    case ir::Op::silu:
    case ir::Op::gelu: return true;
    case ir::Op::constant:
    case ir::Op::add:
    case ir::Op::sub:
    case ir::Op::mul:
    case ir::Op::maximum:
    case ir::Op::minimum:
    case ir::Op::pow:
    case ir::Op::abs:
    case ir::Op::neg:
    case ir::Op::relu:
    case ir::Op::cast:
    case ir::Op::eq:
    case ir::Op::ne:
    case ir::Op::lt:
    case ir::Op::le:
    case ir::Op::gt:
    case ir::Op::ge:
    case ir::Op::where:
    case ir::Op::dropout:  // takes floats only, without promotion (kiln::dropout checks)
    case ir::Op::reshape:
    case ir::Op::transpose:
    case ir::Op::slice:
    case ir::Op::expand:
    case ir::Op::cat:
    case ir::Op::sum:
    case ir::Op::mean:
    case ir::Op::amax:
    case ir::Op::amin:
    case ir::Op::argmax:
    case ir::Op::var:
    case ir::Op::matmul:
    case ir::Op::index_select:
    case ir::Op::index_add:
    case ir::Op::fusion: return false;
  }
  return false;
}

}  // namespace kiln::detail
