// 2-d convolutions: the `conv2d`, `conv_transpose2d` and
// `conv2d_backward_weight` library calls of runtime/executable.h
// (docs/convolution.md).
//
// All three are described by one forward convolution, NCHW:
//
//   y[n, o, i, j] = Σ_{c in o's group, p, q}
//                   x[n, c, i·sh + p·dh − pt, j·sw + q·dw − pl] · w[o, c − g·C/G, p, q]
//
// with x [N, C, H, W], w [O, C/G, KH, KW], y [N, O, HO, WO], G groups (O and
// C divisible by G; output channel o is in group o / (O/G)), stride (sh, sw),
// dilation (dh, dw) and top/left padding (pt, pl): x reads as 0 outside
// [0, H) × [0, W). The bottom/right padding is whatever HO and WO imply. The
// three calls compute each of the three tensors from the other two:
//
//   forward     y from x and w                 buffers x, w, y
//   transpose   x from y and w (the gradient   buffers y, w, x
//               of x for y's gradient y, i.e.
//               conv_transpose2d of y)
//   weightGrad  w from x and y (the gradient   buffers x, y, w
//               of w for y's gradient y)
//
// Operands are read through their strides (in elements, NCHW order, never
// negative; channels-last is strides {H·W·C, 1, W·C, C}); the result is
// written contiguous (row-major NCHW / OIHW). Every call writes its whole
// result (a sum over nothing is 0).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/executable.h"

namespace kiln::runtime {

struct ConvCall {
  enum class Kind : uint8_t { forward, transpose, weightGrad };

  Kind kind = Kind::forward;
  DType dtype = DType::f32;
  int64_t n = 0, c = 0, h = 0, w = 0;  ///< x's sizes
  int64_t o = 0, kh = 0, kw = 0;       ///< w is [o, c / groups, kh, kw]
  int64_t ho = 0, wo = 0;              ///< y is [n, o, ho, wo]
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0, dilationH = 1, dilationW = 1, groups = 1;
  /// The strides (elements, NCHW / OIHW order) of the operands the call
  /// reads: x, w, y as they appear; the written one's are ignored
  /// (contiguous).
  std::array<int64_t, 4> xStrides{}, wStrides{}, yStrides{};

  /// The bottom and right padding HO and WO imply (may be negative when the
  /// last rows or columns of x are never read).
  int64_t padBottom() const { return (ho - 1) * strideH + (kh - 1) * dilationH + 1 - h - padTop; }
  int64_t padRight() const { return (wo - 1) * strideW + (kw - 1) * dilationW + 1 - w - padLeft; }

  /// As the step's integer arguments, and back.
  std::vector<int64_t> encode() const;
  static ConvCall decode(std::span<const int64_t> args);
};

/// The contiguous strides of an NCHW (or OIHW) tensor of these sizes.
std::array<int64_t, 4> contiguousStrides(int64_t n, int64_t c, int64_t h, int64_t w);

/// The CPU library call (LibraryFn): buffers as ConvCall says, args
/// ConvCall::encode(). f32 and bf16 on oneDNN where the build has it, every
/// float dtype through kiln's direct loops otherwise (runtime/conv.cpp).
void conv(const LibraryCall& call);

namespace detail {
/// kiln's direct loops on the host for any float dtype: the reference the
/// other implementations are tested against, and the path for f64 and f16.
/// buffers as ConvCall says.
void convDirect(const ConvCall& call, std::span<void* const> buffers);
/// How the CPU runs this call: "onednn:<oneDNN's implementation>" or
/// "direct" (kiln's loops): for kiln-env, kiln-bench and the tests.
std::string convImplementation(const ConvCall& call);
}  // namespace detail

}  // namespace kiln::runtime
