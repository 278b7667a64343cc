// lowerLibrary: a library node to its runtime call (codegen/lowering_library.h).
#include "codegen/lowering_library.h"

#include <fmt/format.h>

#include "ir/attention.h"
#include "ir/conv.h"
#include "ir/scalar_formulas_random.h"
#include "runtime/attention.h"
#include "runtime/blas.h"
#include "runtime/conv.h"
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

/// attention and attention_backward: the batch dims, each operand's strides
/// over them and over its two matrix dims (a mask's padded with 0s on the
/// left where it has fewer dims, and 0 where it broadcasts).
runtime::AttentionCall attentionCall(const ir::Node& node, std::span<const ir::Layout> inputs) {
  const ir::AttentionOperands a = ir::attentionOperands(node.op(), node.numInputs(), node.attrs());
  const ir::TensorType& q = node.input(0)->type();
  const int r = q.rank();
  runtime::AttentionCall c;
  c.dtype = q.dtype;
  c.batch.assign(q.shape.begin(), q.shape.end() - 2);
  c.lq = q.shape[r - 2], c.e = q.shape[r - 1];
  c.lk = node.input(1)->type().shape[r - 2], c.ev = node.input(2)->type().shape[r - 1];
  c.scale = a.scale;
  c.causal = a.causal;
  if (a.mask >= 0)
    c.mask = node.input(a.mask)->type().dtype == DType::boolean ? runtime::AttentionCall::Mask::boolean
                                                                : runtime::AttentionCall::Mask::additive;
  if (a.p > 0) {
    c.dropout = true;
    c.dropThreshold = ir::formulas::dropoutThreshold(a.p);
    c.dropScale = ir::formulas::dropoutScale(a.p);
  }
  const int operands = a.data + (a.mask >= 0 ? 1 : 0);
  for (int i = 0; i < operands; ++i) {
    const ir::TensorType& t = node.input(i)->type();
    const std::vector<int64_t>& strides = inputs[i].strides;
    runtime::AttentionOperand o;
    const int pad = r - t.rank();  // a mask may have fewer dims
    auto stride = [&](int d) {     // of the result's dim d
      const int own = d - pad;
      return own < 0 || t.shape[own] == 1 ? int64_t{0} : strides[own];
    };
    for (int d = 0; d < r - 2; ++d) o.batchStrides.push_back(stride(d));
    o.rowStride = stride(r - 2), o.colStride = stride(r - 1);
    c.operands.push_back(std::move(o));
  }
  return c;
}

/// conv2d, conv_transpose2d and conv2d_backward_weight as the forward
/// convolution they are read as (ir/conv.h, runtime/conv.h): which operand
/// is x, w or y, and the sizes of each.
runtime::ConvCall convCall(const ir::Node& node, std::span<const ir::Layout> inputs) {
  const ir::ConvAttrs a = ir::convAttrs(node.op(), node.attrs());
  const ir::Shape& in0 = node.input(0)->type().shape;
  const ir::Shape& in1 = node.input(1)->type().shape;
  const ir::Shape& out = node.output()->type().shape;
  auto strides4 = [](const ir::Layout& l) {
    return std::array<int64_t, 4>{l.strides[0], l.strides[1], l.strides[2], l.strides[3]};
  };
  runtime::ConvCall c;
  c.dtype = node.output()->type().dtype;
  const ir::Shape *x = nullptr, *w = nullptr, *y = nullptr;
  if (node.op() == ir::Op::conv2d) {
    c.kind = runtime::ConvCall::Kind::forward;
    x = &in0, w = &in1, y = &out;
    c.xStrides = strides4(inputs[0]), c.wStrides = strides4(inputs[1]);
  } else if (node.op() == ir::Op::conv_transpose2d) {
    c.kind = runtime::ConvCall::Kind::transpose;
    y = &in0, w = &in1, x = &out;
    c.yStrides = strides4(inputs[0]), c.wStrides = strides4(inputs[1]);
  } else {
    c.kind = runtime::ConvCall::Kind::weightGrad;
    x = &in0, y = &in1, w = &out;
    c.xStrides = strides4(inputs[0]), c.yStrides = strides4(inputs[1]);
  }
  c.n = (*x)[0], c.c = (*x)[1], c.h = (*x)[2], c.w = (*x)[3];
  c.o = (*w)[0], c.kh = (*w)[2], c.kw = (*w)[3];
  c.ho = (*y)[2], c.wo = (*y)[3];
  c.strideH = a.stride[0], c.strideW = a.stride[1];
  c.padTop = a.padding[0], c.padLeft = a.padding[1];
  c.dilationH = a.dilation[0], c.dilationW = a.dilation[1];
  c.groups = a.groups;
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
  } else if (node.op() == ir::Op::attention || node.op() == ir::Op::attention_backward) {
    function = node.op() == ir::Op::attention ? &functions.attention : &functions.attentionBackward;
    call.args = attentionCall(node, inputs).encode();
  } else if (node.op() == ir::Op::conv2d || node.op() == ir::Op::conv_transpose2d ||
             node.op() == ir::Op::conv2d_backward_weight) {
    function = &functions.conv;
    call.args = convCall(node, inputs).encode();
  } else {
    KILN_ASSERT(false, "{} has no library call", ir::opName(node.op()));
  }
  call.fn = function->fn;
  call.recordable = function->recordable;
  if (node.op() == ir::Op::matmul || node.op() == ir::Op::conv2d) call.withEpilogue = function->withEpilogue;
  KILN_CHECK(call.fn, "codegen: {} of {} has no library function on {}", ir::opName(node.op()),
             node.output()->type().str(), node.output()->type().device.str());
  return call;
}

}  // namespace kiln::codegen
