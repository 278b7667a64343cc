// kiln::conv2d and kiln::convTranspose2d (frontend/conv.h): PyTorch's
// argument checks and padding rules, then one registry op and the bias.
//
// Note [Convolutions read contiguous operands]
// oneDNN picks its kernel by the operands' layout, and kernels for two
// layouts sum in two orders: a channels-last input and its contiguous copy
// give results a few ulps apart. A compiled program may hold a value in
// another layout than eager code did (its inputs, a gradient that eager
// code has as a broadcast view), so the frontend and the gradient formulas
// pass the ops contiguous operands: a copy where one is not (none in a
// model of contiguous tensors), and eager and compiled calls of a
// convolution see one layout and agree bit for bit. The ops and the
// runtime still read any strides (tests/unit/runtime); a layout the
// compiler chooses (channels-last end to end) is future work.
#include "frontend/conv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/amp/autocast.h"
#include "frontend/amp/autocast_policy.h"
#include "frontend/dispatch.h"
#include "frontend/ops.h"
#include "ir/conv.h"
#include "runtime/error.h"

namespace kiln {

namespace {
std::string describe(const Tensor& x, const Tensor& w, const Tensor& b) {
  return fmt::format("input {}, weight {}{}", x.str(), w.str(), b.defined() ? ", bias " + b.str() : "");
}

/// The checks both share; returns x batched (a view).
Tensor checkOperands(const char* op, const Tensor& x, const Tensor& w, const Tensor& b, int64_t biasSize,
                     const std::string& what) {
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, "{}: expected an input of 3 (unbatched) or 4 dims (NCHW), got {}", op, what);
  KILN_CHECK(w.dim() == 4, "{}: expected a weight of 4 dims, got {}", op, what);
  KILN_CHECK(x.device() == w.device() && (!b.defined() || b.device() == x.device()),
             "{}: expected all tensors on one device, got {}", op, what);
  KILN_CHECK(isFloatingPoint(x.dtype()) && w.dtype() == x.dtype(),
             "{}: expected input and weight of one floating-point dtype, got {}", op, what);
  if (b.defined())
    KILN_CHECK(b.dim() == 1 && b.size(0) == biasSize, "{}: expected a bias of shape [{}], got {}", op, biasSize, what);
  return x.dim() == 3 ? x.unsqueeze(0) : x;
}

/// y + bias [O] over the channels, in y's dtype (under autocast an f32
/// bias is added in f32 and the sum rounded once, as linear's: Note
/// [Autocast bias] in frontend/linalg.cpp).
Tensor addBias(const Tensor& y, const Tensor& bias, bool unbatched) {
  Tensor out = y;
  if (bias.defined()) {
    const Tensor b = bias.reshape({1, bias.size(0), 1, 1});
    out = bias.dtype() == y.dtype() ? y + b : (y + b).to(y.dtype());
  }
  return unbatched ? out.squeeze(0) : out;
}
}  // namespace

Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& bias, const Conv2dOptions& options) {
  KILN_CHECK(x0.defined() && w0.defined(), "conv2d: argument {} is an undefined tensor", x0.defined() ? 1 : 0);
  const Tensor x1 = detail::autocastArg("conv2d", x0), w = detail::autocastArg("conv2d", w0);
  const std::string what = describe(x1, w, bias);
  KILN_CHECK(!bias.defined() || bias.dtype() == x1.dtype() ||
                 (isAutocastEnabled(bias.device().type()) && isFloatingPoint(bias.dtype())),
             "conv2d: expected input, weight and bias of one dtype, got {}", what);
  const Tensor x = checkOperands("conv2d", x1, w, bias, w.size(0), what);
  ir::ConvAttrs a;
  a.stride = options.stride;
  a.dilation = options.dilation;
  a.groups = options.groups;
  if (const auto* pads = std::get_if<std::array<int64_t, 2>>(&options.padding)) {
    a.padding = {(*pads)[0], (*pads)[1], (*pads)[0], (*pads)[1]};
  } else {
    const std::string& mode = std::get<std::string>(options.padding);
    KILN_CHECK(mode == "same" || mode == "valid",
               "conv2d: padding must be \"same\", \"valid\" or two sizes, got \"{}\"", mode);
    if (mode == "same") {
      KILN_CHECK(a.stride[0] == 1 && a.stride[1] == 1,
                 "conv2d: padding=\"same\" is not supported for strided convolutions (stride [{}]), as in PyTorch",
                 fmt::join(a.stride, ", "));
      for (int d = 0; d < 2; ++d) {
        const int64_t total = a.dilation[d] * (w.size(d + 2) - 1);
        a.padding[d] = total / 2;
        a.padding[d + 2] = total - total / 2;
      }
    }
  }
  // Note [Convolutions read contiguous operands].
  const Tensor y =
      detail::dispatch(ir::Op::conv2d, {x.contiguous(), w.contiguous()}, ir::convAttributes(ir::Op::conv2d, a));
  return addBias(y, bias, x1.dim() == 3);
}

Tensor convTranspose2d(const Tensor& x0, const Tensor& w0, const Tensor& bias, const ConvTranspose2dOptions& options) {
  KILN_CHECK(x0.defined() && w0.defined(), "conv_transpose2d: argument {} is an undefined tensor",
             x0.defined() ? 1 : 0);
  const Tensor x1 = detail::autocastArg("conv_transpose2d", x0), w = detail::autocastArg("conv_transpose2d", w0);
  const std::string what = describe(x1, w, bias);
  KILN_CHECK(!bias.defined() || bias.dtype() == x1.dtype() ||
                 (isAutocastEnabled(bias.device().type()) && isFloatingPoint(bias.dtype())),
             "conv_transpose2d: expected input, weight and bias of one dtype, got {}", what);
  const Tensor x = checkOperands("conv_transpose2d", x1, w, bias, w.size(1) * options.groups, what);
  ir::ConvAttrs a;
  a.stride = options.stride;
  a.padding = {options.padding[0], options.padding[1], options.padding[0], options.padding[1]};
  a.dilation = options.dilation;
  a.groups = options.groups;
  a.outputPadding = options.outputPadding;
  const Tensor y = detail::dispatch(ir::Op::conv_transpose2d, {x, w}, ir::convAttributes(ir::Op::conv_transpose2d, a));
  return addBias(y, bias, x1.dim() == 3);
}

}  // namespace kiln
