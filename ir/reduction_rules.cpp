// The type rules of the reductions (docs/ops.md, "Reductions"): which dims
// a reduction takes (`dims`, or argmax's `dim`), the shape it leaves
// (`keepdim`), the dtypes it takes and gives (sum of integers and bool is
// i64, as in PyTorch; mean and var take floats only), and the reductions
// that have no value over no elements (amax, amin, argmax of an empty dim).
#include "ir/reduction_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "runtime/error.h"

namespace kiln::ir {

namespace {
std::string dimsStr(std::span<const int64_t> dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

bool keepdimAttr(Op op, const Attributes& attrs) {
  const int64_t keepdim = intAttr(attrs, "keepdim", opName(op), 0);
  KILN_CHECK(keepdim == 0 || keepdim == 1, "{}: attribute 'keepdim' must be 0 or 1, got {}", opName(op), keepdim);
  return keepdim == 1;
}
}  // namespace

std::vector<int> normalizeDims(std::string_view what, std::span<const int64_t> dims, const TensorType& type) {
  const int rank = type.rank();
  // A 0-d tensor takes dim -1 and 0 as PyTorch does; they reduce nothing.
  const int64_t wrap = std::max(rank, 1);
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(wrap), false);
  for (int64_t d : dims) {
    KILN_CHECK(d >= -wrap && d < wrap, "{}: dim {} of dims {} is out of range for {} (expected dims in [{}, {}])", what,
               d, dimsStr(dims), type.str(), -wrap, wrap - 1);
    const int64_t n = d < 0 ? d + wrap : d;
    KILN_CHECK(!seen[static_cast<size_t>(n)], "{}: dim {} is repeated in dims {} for {}", what, n, dimsStr(dims),
               type.str());
    seen[static_cast<size_t>(n)] = true;
    if (rank > 0) out.push_back(static_cast<int>(n));
  }
  if (dims.empty())
    for (int d = 0; d < rank; ++d) out.push_back(d);
  std::sort(out.begin(), out.end());
  return out;
}

int normalizeDim(std::string_view what, int64_t dim, const TensorType& type) {
  const int64_t wrap = std::max(type.rank(), 1);
  KILN_CHECK(dim >= -wrap && dim < wrap, "{}: dim {} is out of range for {} (expected a dim in [{}, {}])", what, dim,
             type.str(), -wrap, wrap - 1);
  return static_cast<int>(dim < 0 ? dim + wrap : dim);
}

ReductionShape reductionShape(Op op, const TensorType& type, const Attributes& attrs) {
  KILN_ASSERT(isReduction(op), "reductionShape of {}", opName(op));
  const std::string_view name = opName(op);
  ReductionShape r;
  if (op == Op::argmax) {
    const int dim = normalizeDim(name, intAttr(attrs, "dim", name), type);
    if (type.rank() > 0) r.dims = {dim};
  } else {
    r.dims = normalizeDims(name, intListAttr(attrs, "dims", name), type);
  }
  r.keepdim = keepdimAttr(op, attrs);
  return r;
}

Shape reducedShape(const Shape& shape, std::span<const int> dims, bool keepdim) {
  Shape out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(shape[static_cast<size_t>(d)]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

namespace detail {

TensorType inferReduction(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  const std::string_view name = opName(op);
  const TensorType& x = in[0];
  const ReductionShape r = reductionShape(op, x, attrs);
  DType dtype = x.dtype;
  if (op == Op::sum && !isFloatingPoint(x.dtype)) dtype = DType::i64;  // as in PyTorch: no overflow at i32
  checkDTypeClass(op, x.dtype, x.str());                               // mean and var: floats; argmax: not bool
  if (op == Op::var) intAttr(attrs, "correction", name, 1);            // an int when given
  if (op == Op::argmax) dtype = DType::i64;
  if (op == Op::amax || op == Op::amin || op == Op::argmax) {
    // No identity: the maximum of no elements is not a number.
    for (int d : r.dims)
      KILN_CHECK(x.shape[static_cast<size_t>(d)] != 0,
                 "{}: cannot reduce dim {} of {}, which has size 0 ({} of no elements is undefined)", name, d, x.str(),
                 name);
  }
  return {dtype, reducedShape(x.shape, r.dims, r.keepdim), x.device};
}

}  // namespace detail
}  // namespace kiln::ir
