// ConvCall's integer arguments (runtime/conv.h): what a library step of the
// three convolution calls carries, shared by every backend's call (the CPU's
// runtime/conv.cpp, OpenCL's runtime/opencl_conv.cpp).
//
// The layout is flat and fixed, 30 values:
//   kind, dtype, n, c, h, w, o, kh, kw, ho, wo,
//   strideH, strideW, padTop, padLeft, dilationH, dilationW, groups,
//   xStrides[4], wStrides[4], yStrides[4]
#include "runtime/conv.h"
#include "runtime/error.h"

namespace kiln::runtime {

namespace {
constexpr size_t kNumArgs = 30;
}  // namespace

std::vector<int64_t> ConvCall::encode() const {
  std::vector<int64_t> args = {static_cast<int64_t>(kind), static_cast<int64_t>(dtype), n, c, h, w, o, kh, kw, ho, wo};
  args.insert(args.end(), {strideH, strideW, padTop, padLeft, dilationH, dilationW, groups});
  for (const auto* strides : {&xStrides, &wStrides, &yStrides})
    args.insert(args.end(), strides->begin(), strides->end());
  KILN_ASSERT(args.size() == kNumArgs, "conv call encoded as {} arguments", args.size());
  return args;
}

ConvCall ConvCall::decode(std::span<const int64_t> args) {
  KILN_ASSERT(args.size() == kNumArgs, "conv call with {} arguments, not {}", args.size(), kNumArgs);
  KILN_ASSERT(args[0] >= 0 && args[0] <= static_cast<int64_t>(Kind::weightGrad), "conv call of kind {}", args[0]);
  ConvCall c;
  size_t at = 0;
  c.kind = static_cast<Kind>(args[at++]);
  c.dtype = static_cast<DType>(args[at++]);
  for (int64_t* field : {&c.n, &c.c, &c.h, &c.w, &c.o, &c.kh, &c.kw, &c.ho, &c.wo, &c.strideH, &c.strideW, &c.padTop,
                         &c.padLeft, &c.dilationH, &c.dilationW, &c.groups})
    *field = args[at++];
  for (auto* strides : {&c.xStrides, &c.wStrides, &c.yStrides})
    for (int64_t& stride : *strides) stride = args[at++];
  return c;
}

std::array<int64_t, 4> contiguousStrides(int64_t n, int64_t c, int64_t h, int64_t w) {
  (void)n;  // the outermost size never enters a stride
  return {c * h * w, h * w, w, 1};
}

}  // namespace kiln::runtime
