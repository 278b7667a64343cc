// The type rules of the library calls: matmul (ranks >= 2, one dtype that is
// not bool, inner sizes equal, batch dims broadcasting, as torch.matmul on
// operands of rank 2 or more) and index_select / index_add (a dim in range,
// a 1-d i32 or i64 index, index_add's source shaped like x but for the
// index's length at dim, of x's dtype).
#include "ir/library_rules.h"

#include "ir/attention.h"
#include "ir/conv.h"

#include "runtime/error.h"

namespace kiln::ir::detail {

namespace {
std::string typesStr(std::span<const TensorType> types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i)
    s += (i == 0 ? "" : i + 1 == types.size() ? " and " : ", ") + types[i].str();
  return s;
}

void checkDevices(std::string_view name, std::span<const TensorType> in) {
  for (const TensorType& t : in.subspan(1))
    KILN_CHECK(t.device == in[0].device, "{}: expected all tensors on the same device, got {}", name, typesStr(in));
}

TensorType inferMatmul(std::span<const TensorType> in) {
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  checkDevices("matmul", in);
  KILN_CHECK(a.rank() >= 2 && b.rank() >= 2, "matmul: expected operands of rank 2 or more, got {}", typesStr(in));
  KILN_CHECK(a.dtype == b.dtype, "matmul: expected both operands of one dtype, got {}", typesStr(in));
  checkDTypeClass(Op::matmul, a.dtype, typesStr(in));
  const int64_t k = a.shape[a.shape.size() - 1], kb = b.shape[b.shape.size() - 2];
  KILN_CHECK(k == kb, "matmul: shapes {} cannot be multiplied ({} != {})", typesStr(in), k, kb);
  const Shape batchA(a.shape.begin(), a.shape.end() - 2), batchB(b.shape.begin(), b.shape.end() - 2);
  std::optional<Shape> batch = broadcastShapes(batchA, batchB);
  KILN_CHECK(batch.has_value(), "matmul: batch dimensions {} and {} of {} do not broadcast", shapeStr(batchA),
             shapeStr(batchB), typesStr(in));
  Shape shape = *batch;
  shape.push_back(a.shape[a.shape.size() - 2]);
  shape.push_back(b.shape.back());
  return {a.dtype, shape, a.device};
}

/// Checks `dim` and the index of index_select and index_add; returns dim.
int64_t checkIndexing(std::string_view name, std::span<const TensorType> in, const Attributes& attrs) {
  const TensorType& x = in[0];
  const TensorType& index = in[1];
  checkDevices(name, in);
  const int64_t dim = intAttr(attrs, "dim", name);
  KILN_CHECK(x.rank() >= 1, "{}: expected a tensor of rank 1 or more, got {}", name, x.str());
  KILN_CHECK(dim >= 0 && dim < x.rank(), "{}: dim {} is out of range for {} (expected 0 <= dim < {})", name, dim,
             x.str(), x.rank());
  KILN_CHECK(index.rank() == 1 && (index.dtype == DType::i64 || index.dtype == DType::i32),
             "{}: expected a 1-d index of dtype i64 or i32, got {}", name, index.str());
  return dim;
}

TensorType inferIndexSelect(std::span<const TensorType> in, const Attributes& attrs) {
  const int64_t dim = checkIndexing("index_select", in, attrs);
  TensorType out = in[0];
  out.shape[static_cast<size_t>(dim)] = in[1].shape[0];
  return out;
}

TensorType inferIndexAdd(std::span<const TensorType> in, const Attributes& attrs) {
  const int64_t dim = checkIndexing("index_add", in, attrs);
  const TensorType& x = in[0];
  const TensorType& source = in[2];
  checkDTypeClass(Op::index_add, x.dtype, typesStr(in));
  KILN_CHECK(source.dtype == x.dtype, "index_add: expected a source of the dtype of x, got {}", typesStr(in));
  Shape expected = x.shape;
  expected[static_cast<size_t>(dim)] = in[1].shape[0];
  KILN_CHECK(source.shape == expected,
             "index_add: expected a source of shape {} (x's, with the index's length {} at dim {}), got {}",
             shapeStr(expected), in[1].shape[0], dim, typesStr(in));
  return x;
}
}  // namespace

TensorType inferLibrary(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  // Not a switch: only library calls reach here (inferType dispatches on the
  // kind). A new library op adds its rule here.
  if (op == Op::matmul) return inferMatmul(in);
  if (op == Op::index_select) return inferIndexSelect(in, attrs);
  if (op == Op::index_add) return inferIndexAdd(in, attrs);
  if (op == Op::attention || op == Op::attention_backward) return inferAttention(op, in, attrs);
  if (op == Op::conv2d || op == Op::conv_transpose2d || op == Op::conv2d_backward_weight)
    return inferConv(op, in, attrs);
  KILN_ASSERT(false, "inferLibrary called for {}", opName(op));
  return {};
}

}  // namespace kiln::ir::detail
