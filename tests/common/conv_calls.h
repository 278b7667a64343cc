// squareConvCall: a runtime::ConvCall of a square kernel with equal stride,
// padding and dilation along both dims, the output size PyTorch gives it and
// every operand contiguous (the runtime tests of the CPU, cuDNN and GPU
// convolution calls).
#pragma once

#include "runtime/conv.h"

namespace kiln::testutil {

inline runtime::ConvCall squareConvCall(runtime::ConvCall::Kind kind, int64_t n, int64_t c, int64_t h, int64_t w,
                                        int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dilation = 1,
                                        int64_t groups = 1, DType dtype = DType::f32) {
  runtime::ConvCall r;
  r.kind = kind;
  r.dtype = dtype;
  r.n = n, r.c = c, r.h = h, r.w = w, r.o = o, r.kh = k, r.kw = k;
  r.strideH = r.strideW = stride;
  r.padTop = r.padLeft = pad;
  r.dilationH = r.dilationW = dilation;
  r.groups = groups;
  r.ho = (h + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  r.wo = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  r.xStrides = runtime::contiguousStrides(n, c, h, w);
  r.wStrides = runtime::contiguousStrides(o, c / groups, k, k);
  r.yStrides = runtime::contiguousStrides(n, o, r.ho, r.wo);
  return r;
}

}  // namespace kiln::testutil
