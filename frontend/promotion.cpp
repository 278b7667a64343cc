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
  // Reductions that take floats only (mean, var) refuse integers instead,
  // as PyTorch's do; draws take their operands as they are.
  return ir::opInfo(op).kind == ir::OpKind::elementwise && ir::promotesOperands(op) &&
         ir::dtypeClass(op) == ir::DTypeClass::floats;
}

}  // namespace kiln::detail
