// 2-d convolutions, like libtorch's: kiln::conv2d and kiln::convTranspose2d
// with torch.nn.functional's semantics (docs/convolution.md). Each is the
// registry's `conv2d` / `conv_transpose2d` op (a library call: oneDNN on the
// CPU, kiln's kernels on OpenCL; runtime/conv.h) plus the bias added as an
// elementwise op, so they run eagerly and trace under kiln::compile alike.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>

#include "frontend/tensor.h"

namespace kiln {

/// torch.nn.functional.conv2d's arguments after input, weight and bias.
struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  /// {ph, pw} on both sides of each dim, or "valid" (no padding) or "same"
  /// (the output as large as the input; stride 1 only; when the dilated
  /// kernel's extent minus one is odd, the extra row/column goes at the
  /// bottom/right, as PyTorch).
  std::variant<std::array<int64_t, 2>, std::string> padding = std::array<int64_t, 2>{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

/// The 2-d convolution of x [N, C, H, W] (or unbatched [C, H, W]) by weight
/// [O, C/groups, KH, KW], plus bias [O] when defined: [N, O, HO, WO] with HO
/// = floor((H + 2 ph - dh (KH - 1) - 1) / sh) + 1, as
/// torch.nn.functional.conv2d (a cross-correlation). x, weight and bias of
/// one floating-point dtype on one device; a mistake is a kiln::Error
/// naming the shapes. Under autocast it runs in the low dtype, as PyTorch's.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Conv2dOptions& options = {});

/// torch.nn.functional.conv_transpose2d's arguments after input, weight and
/// bias (its argument order: stride, padding, output_padding, groups,
/// dilation).
struct ConvTranspose2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> outputPadding{0, 0};  ///< each below its stride
  int64_t groups = 1;
  std::array<int64_t, 2> dilation{1, 1};
};

/// The transposed convolution (the gradient of conv2d's input) of x [N,
/// Cin, H, W] (or [Cin, H, W]) by weight [Cin, Cout/groups, KH, KW], plus
/// bias [Cout]: [N, Cout, HO, WO] with HO = (H - 1) sh - 2 ph + dh (KH - 1)
/// + output_padding + 1, as torch.nn.functional.conv_transpose2d.
Tensor convTranspose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                       const ConvTranspose2dOptions& options = {});

}  // namespace kiln
