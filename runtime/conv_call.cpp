// ConvCall's encoding as a library step's integer arguments, and its
// descriptions for errors (runtime/conv.h).
#include <fmt/format.h>

#include "runtime/conv.h"
#include "runtime/error.h"

namespace kiln::runtime {

namespace {
constexpr size_t kScalars = 18;  // kind, dtype, 16 sizes and parameters
}

std::array<int64_t, 4> contiguousStrides(int64_t n, int64_t c, int64_t h, int64_t w) {
  (void)n;
  return {c * h * w, h * w, w, 1};
}

const char* ConvCall::opName() const {
  switch (kind) {
    case Kind::forward: return "conv2d";
    case Kind::transpose: return "conv_transpose2d";
    case Kind::weightGrad: return "conv2d_backward_weight";
  }
  return "conv";
}

std::string ConvCall::str() const {
  return fmt::format("x [{}, {}, {}, {}], w [{}, {}, {}, {}], y [{}, {}, {}, {}], {}", n, c, h, w, o,
                     groups ? c / groups : 0, kh, kw, n, o, ho, wo, dtypeName(dtype));
}

std::vector<int64_t> ConvCall::encode() const {
  std::vector<int64_t> args = {static_cast<int64_t>(kind),
                               static_cast<int64_t>(dtype),
                               n,
                               c,
                               h,
                               w,
                               o,
                               kh,
                               kw,
                               ho,
                               wo,
                               strideH,
                               strideW,
                               padTop,
                               padLeft,
                               dilationH,
                               dilationW,
                               groups};
  for (const auto* s : {&xStrides, &wStrides, &yStrides}) args.insert(args.end(), s->begin(), s->end());
  return args;
}

ConvCall ConvCall::decode(std::span<const int64_t> args) {
  KILN_ASSERT(args.size() == kScalars + 12, "conv call with {} arguments", args.size());
  ConvCall k;
  k.kind = static_cast<Kind>(args[0]);
  k.dtype = static_cast<DType>(args[1]);
  int64_t* fields[] = {&k.n,  &k.c,       &k.h,       &k.w,      &k.o,       &k.kh,        &k.kw,        &k.ho,
                       &k.wo, &k.strideH, &k.strideW, &k.padTop, &k.padLeft, &k.dilationH, &k.dilationW, &k.groups};
  for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = args[2 + i];
  for (int i = 0; i < 4; ++i) {
    k.xStrides[i] = args[kScalars + i];
    k.wStrides[i] = args[kScalars + 4 + i];
    k.yStrides[i] = args[kScalars + 8 + i];
  }
  KILN_ASSERT(k.groups >= 1 && k.c % k.groups == 0 && k.o % k.groups == 0,
              "conv call with groups {} for {} and {} "
              "channels",
              k.groups, k.c, k.o);
  return k;
}

}  // namespace kiln::runtime
