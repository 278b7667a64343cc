// conv2d, conv_transpose2d and conv2d_backward_weight on OpenCL devices
// (runtime/opencl_library.h): runtime/conv.h's three calls, the same
// buffers and ConvCall arguments as the CPU's, as one launch of one of
// kiln's direct-convolution kernels (runtime/opencl_conv_kernels.cpp) on the
// call's stream, without blocking the host.
//
// Each work-item computes kTile = 4 channels of the result that share their
// reads of the other operand (forward and weightGrad: 4 output channels of
// a group, which share x; transpose: 4 input channels, which share y), or
// one channel where a group has fewer than 4 of them (depthwise), times
// kColumns = 4 columns (y's, x's or w's) as one vector
// (runtime/opencl_conv_kernels.cpp). Every result element is written, a
// sum of no terms as 0, so an empty batch or window needs no fill; an
// empty result launches nothing.
// docs/convolution.md says why direct convolution and not an implicit GEMM
// on CLBlast.
#include "runtime/error.h"
#include "runtime/opencl_library.h"

#if KILN_HAVE_OPENCL
#include <algorithm>
#include <array>
#include <string>

#include "runtime/conv.h"
#include "runtime/opencl_kernels.h"
#endif

namespace kiln::runtime::opencl {

#if KILN_HAVE_OPENCL

namespace {

const char* kernelName(ConvCall::Kind kind) {
  switch (kind) {
    case ConvCall::Kind::forward: return "forward";
    case ConvCall::Kind::transpose: return "transpose";
    case ConvCall::Kind::weightGrad: return "weight_grad";
  }
  return "";
}

constexpr int64_t kTile = 4;     ///< result channels per work-item where a group has that many
constexpr int64_t kColumns = 4;  ///< columns per work-item: y's (forward), x's (transpose), w's (weightGrad)

}  // namespace

void conv(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "conv call with {} buffers", call.buffers.size());
  const ConvCall c = ConvCall::decode(call.args);
  const char* op = c.opName();
  KILN_ASSERT(c.dtype == DType::f32 || c.dtype == DType::f64 || c.dtype == DType::f16 || c.dtype == DType::bf16,
              "{} of {} reached the runtime", op, dtypeName(c.dtype));
  KILN_ASSERT(
      c.n >= 0 && c.c >= 0 && c.h >= 0 && c.w >= 0 && c.o >= 0 && c.kh >= 0 && c.kw >= 0 && c.ho >= 0 && c.wo >= 0,
      "{} call with a negative size", op);
  KILN_ASSERT(c.groups >= 1 && c.c % c.groups == 0 && c.o % c.groups == 0,
              "{} call with {} groups of {} and {} channels", op, c.groups, c.c, c.o);
  KILN_ASSERT(c.strideH >= 1 && c.strideW >= 1 && c.dilationH >= 1 && c.dilationW >= 1,
              "{} call with stride {}x{} and dilation {}x{}", op, c.strideH, c.strideW, c.dilationH, c.dilationW);
  const int index = call.device.index();
  KILN_CHECK(c.dtype != DType::f64 || devices()[static_cast<size_t>(index)].fp64, "{}: {} has no f64 (cl_khr_fp64)", op,
             call.device.str());

  const int64_t cg = c.c / c.groups, og = c.o / c.groups;
  ConvArgs a;
  a.n = c.n, a.c = c.c, a.h = c.h, a.w = c.w, a.o = c.o, a.kh = c.kh, a.kw = c.kw, a.ho = c.ho, a.wo = c.wo;
  a.strideH = c.strideH, a.strideW = c.strideW, a.padTop = c.padTop, a.padLeft = c.padLeft;
  a.dilationH = c.dilationH, a.dilationW = c.dilationW, a.groups = c.groups;
  std::array<int64_t, 4> xs = c.xStrides, ws = c.wStrides, ys = c.yStrides;
  // The result's strides are contiguous; `channels` is the number of its
  // channels a group has, which a work-item takes kTile at a time.
  int64_t channels = 0, spatial = 0;
  switch (c.kind) {
    case ConvCall::Kind::forward:
      ys = contiguousStrides(c.n, c.o, c.ho, c.wo);
      channels = og, spatial = c.n * c.ho * ((c.wo + kColumns - 1) / kColumns);
      break;
    case ConvCall::Kind::transpose:
      xs = contiguousStrides(c.n, c.c, c.h, c.w);
      // Each residue of x's columns mod strideW in quads of kColumns.
      channels = cg, spatial = c.n * c.h * c.strideW * (((c.w + c.strideW - 1) / c.strideW + kColumns - 1) / kColumns);
      break;
    case ConvCall::Kind::weightGrad:
      ws = contiguousStrides(c.o, cg, c.kh, c.kw);
      channels = og, spatial = cg * c.kh * ((c.kw + kColumns - 1) / kColumns);
      break;
  }
  std::copy(xs.begin(), xs.end(), a.xStrides);
  std::copy(ws.begin(), ws.end(), a.wStrides);
  std::copy(ys.begin(), ys.end(), a.yStrides);
  const int64_t tile = channels >= kTile ? kTile : 1;
  a.total = c.groups * ((channels + tile - 1) / tile) * spatial;
  if (a.total == 0) return;  // an empty result
  const int64_t item = itemSize(c.dtype);
  for (size_t b = 0; b < 3; ++b) a.offsets[b] = elementOffset(op, call.buffers[b], item);
  const std::string name = fmt::format("kiln_conv_{}_{}_t{}", kernelName(c.kind), dtypeName(c.dtype), tile);
  launchKernel(index, queueOf(index, call.stream), name,
               {memOf(call.buffers[0]), memOf(call.buffers[1]), memOf(call.buffers[2])}, a, a.total,
               KernelProgram::conv);
}

#else  // !KILN_HAVE_OPENCL

void conv(const LibraryCall& call) {
  fail("conv: {}: kiln was built without OpenCL (Debian ocl-icd-opencl-dev)", call.device.str());
}

#endif

}  // namespace kiln::runtime::opencl
