// lowerLibrary: a library node to its runtime call (codegen/lowering_library.h).
#include "codegen/lowering_library.h"

#include <fmt/format.h>

#include "runtime/blas.h"
#include "runtime/error.h"
#include "runtime/indexing.h"

namespace kiln::codegen {

namespace {
/// matmul: the result's batch dims, with each operand's stride over them (0
/// where it has no such dim or a size-1 one: broadcast).
runtime::MatmulCall matmulCall(const ir::Node& node, std::span<const ir::Layout> inputs) {
  const ir::TensorType& a = node.input(0)->type();
  const ir::TensorType& b = node.input(1)->type();
  const ir::TensorType& out = node.output()->type();
  runtime::MatmulCall c;
  c.dtype = out.dtype;
  const int ra = a.rank(), rb = b.rank(), ro = out.rank();
  c.m = a.shape[ra - 2], c.k = a.shape[ra - 1], c.n = b.shape[rb - 1];
  c.aRowStride = inputs[0].strides[ra - 2], c.aColStride = inputs[0].strides[ra - 1];
  c.bRowStride = inputs[1].strides[rb - 2], c.bColStride = inputs[1].strides[rb - 1];
  auto batchStride = [](const ir::TensorType& t, const ir::Layout& l, int outDim, int outBatch) {
    const int d = outDim - (outBatch - (t.rank() - 2));  // aligned from the right
    return d < 0 || t.shape[d] == 1 ? int64_t{0} : l.strides[d];
  };
  for (int d = 0; d < ro - 2; ++d) {
    c.batch.push_back(out.shape[d]);
    c.aBatchStrides.push_back(batchStride(a, inputs[0], d, ro - 2));
    c.bBatchStrides.push_back(batchStride(b, inputs[1], d, ro - 2));
  }
  return c;
}

runtime::IndexCall indexCall(const ir::Node& node, std::span<const ir::Layout> inputs) {
  const ir::TensorType& x = node.input(0)->type();
  const ir::TensorType& index = node.input(1)->type();
  runtime::IndexCall c;
  c.dtype = x.dtype;
  c.indexDType = index.dtype;
  c.dim = ir::intAttr(node.attrs(), "dim", ir::opName(node.op()));
  c.sizes = x.shape;
  c.strides = inputs[0].strides;
  c.numIndices = index.shape[0];
  c.indexStride = inputs[1].strides[0];
  if (node.op() == ir::Op::index_add) c.sourceStrides = inputs[2].strides;
  return c;
}
}  // namespace

LoweredCall lowerLibrary(const ir::Node& node, std::span<const ir::Layout> inputs, const LibraryFunctions& functions) {
  KILN_ASSERT(node.info().kind == ir::OpKind::library, "lowerLibrary of {}", ir::opName(node.op()));
  KILN_ASSERT(static_cast<int>(inputs.size()) == node.numInputs(), "{} layouts for {} operands of {}", inputs.size(),
              node.numInputs(), ir::opName(node.op()));
  for (int i = 0; i < node.numInputs(); ++i)
    KILN_ASSERT(inputs[i].strides.size() == node.input(i)->type().shape.size(), "layout of operand {} of {}", i,
                ir::opName(node.op()));
  LoweredCall call;
  call.name = fmt::format("{}_{}", ir::opName(node.op()), dtypeName(node.output()->type().dtype));
  // Not a switch: only library calls get here (checked above).
  const LibraryFunction* function = nullptr;
  if (node.op() == ir::Op::matmul) {
    function = &functions.matmul;
    call.args = matmulCall(node, inputs).encode();
  } else if (node.op() == ir::Op::index_select) {
    function = &functions.indexSelect;
    call.args = indexCall(node, inputs).encode();
  } else if (node.op() == ir::Op::index_add) {
    function = &functions.indexAdd;
    call.args = indexCall(node, inputs).encode();
  } else {
    KILN_ASSERT(false, "{} has no library call", ir::opName(node.op()));
  }
  call.fn = function->fn;
  call.recordable = function->recordable;
  KILN_CHECK(call.fn, "codegen: {} of {} has no library function on {}", ir::opName(node.op()),
             node.output()->type().str(), node.output()->type().device.str());
  return call;
}

}  // namespace kiln::codegen
