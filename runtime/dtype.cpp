// Names and sizes of the dtypes in runtime/dtype.h.
#include "runtime/dtype.h"

#include <array>

#include "runtime/error.h"

namespace kiln {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t size;
  bool floating;
};
// Indexed by DType; the static_assert keeps it in step with the enum.
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {DType::f32, "f32", 4, true},
    {DType::f16, "f16", 2, true},
    {DType::bf16, "bf16", 2, true},
    {DType::f64, "f64", 8, true},
    {DType::i32, "i32", 4, false},
    {DType::i64, "i64", 8, false},
    {DType::boolean, "bool", 1, false},
}};
static_assert(static_cast<int>(DType::boolean) + 1 == kNumDTypes);

const DTypeInfo& info(DType dtype) {
  auto i = static_cast<size_t>(dtype);
  KILN_ASSERT(i < kInfo.size() && kInfo[i].dtype == dtype, "dtype table out of step");
  return kInfo[i];
}
}  // namespace

std::string_view dtypeName(DType dtype) { return info(dtype).name; }
int64_t itemSize(DType dtype) { return info(dtype).size; }
bool isFloatingPoint(DType dtype) { return info(dtype).floating; }

std::optional<DType> parseDType(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.dtype;
  return std::nullopt;
}

}  // namespace kiln
