// indexSelect, indexAdd and embedding (frontend/indexing.h).
#include "frontend/indexing.h"

#include "frontend/dispatch.h"
#include "ir/op_registry.h"
#include "runtime/error.h"

namespace kiln {

namespace {
/// Checks the operands common to index_select and index_add; returns the dim in [0, rank).
int64_t indexDim(const char* name, const Tensor& x, int64_t dim, const Tensor& index) {
  KILN_CHECK(x.defined() && index.defined(), "{}: argument {} is an undefined tensor", name, x.defined() ? 2 : 0);
  KILN_CHECK(x.dim() >= 1, "{}: expected a tensor of rank 1 or more, got {}", name, x.str());
  KILN_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32,
             "{}: expected an index of dtype i64 or i32, got {}", name, index.str());
  KILN_CHECK(index.dim() == 1, "{}: expected a 1-d index, got {}", name, index.str());
  return ir::normalizeDim(name, dim, x.type());
}
}  // namespace

Tensor indexSelect(const Tensor& x, int64_t dim, const Tensor& index) {
  const int64_t d = indexDim("index_select", x, dim, index);
  return detail::dispatch(ir::Op::index_select, {x, index}, {{"dim", d}});
}

Tensor indexAdd(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  const int64_t d = indexDim("index_add", x, dim, index);
  KILN_CHECK(source.defined(), "index_add: argument 3 is an undefined tensor");
  return detail::dispatch(ir::Op::index_add, {x, index, source}, {{"dim", d}});
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  KILN_CHECK(weight.defined() && indices.defined(), "embedding: argument {} is an undefined tensor",
             weight.defined() ? 1 : 0);
  KILN_CHECK(weight.dim() == 2, "embedding: expected a 2-d weight [num, dim], got {}", weight.str());
  KILN_CHECK(indices.dtype() == DType::i64 || indices.dtype() == DType::i32,
             "embedding: expected indices of dtype i64 or i32, got {}", indices.str());
  Shape shape = indices.shape();
  shape.push_back(weight.size(1));
  return indexSelect(weight, 0, indices.reshape({-1})).view(shape);
}

}  // namespace kiln
