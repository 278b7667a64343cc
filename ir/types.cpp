// Tensor types: printing and NumPy broadcasting.
#include "ir/types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::ir {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    // Saturate instead of overflowing (undefined behaviour): a shape written
    // in an attribute can be anything, and the checks that compare counts
    // must see "too many", not a wrapped-around number.
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) n = INT64_MAX;
  }
  return n;
}

int64_t TensorType::numel() const { return ir::numel(shape); }

std::string shapeStr(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

std::string TensorType::str() const {
  return fmt::format("{}{}@{}", dtypeName(dtype), shapeStr(shape), device.str());
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; a missing dimension acts as 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln::ir
