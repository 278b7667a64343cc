// The convolution ops (ir/Ops.def): conv2d, conv_transpose2d and
// conv2d_backward_weight, their attributes and type rules
// (docs/convolution.md). All three are read as one forward convolution of
// an input x [N, C, H, W] by a weight w [O, C/G, KH, KW] into y [N, O, HO,
// WO] (runtime/conv.h): conv2d computes y, conv_transpose2d x (from y and
// w) and conv2d_backward_weight w (from x and y).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir {

/// A convolution node's attributes.
struct ConvAttrs {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 4> padding{};  ///< top, left, bottom, right
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  std::array<int64_t, 2> outputPadding{};  ///< conv_transpose2d's
  std::array<int64_t, 2> kernel{};         ///< conv2d_backward_weight's
};
/// Reads and checks them (strides and dilations >= 1, paddings >= 0,
/// groups >= 1, output padding >= 0 and below the stride (PyTorch also
/// allows it below the dilation: kiln does not, so that the transposed
/// convolution is always the gradient of the convolution it transposes),
/// a kernel >= 1); kiln::Error naming the op otherwise.
ConvAttrs convAttrs(Op op, const Attributes& attrs);
/// The attributes as a node holds them (only those `op` has).
Attributes convAttributes(Op op, const ConvAttrs& a);

/// The output size of a convolution along one dim: floor((in + before +
/// after - dilation (kernel - 1) - 1) / stride) + 1 (may be < 1: too small).
int64_t convOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after, int64_t dilation);
/// The output size of a transposed convolution along one dim: (in - 1)
/// stride - before - after + dilation (kernel - 1) + outputPadding + 1.
int64_t convTransposeOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after,
                                int64_t dilation, int64_t outputPadding);

namespace detail {
/// The result types of the three ops (ir::inferType).
TensorType inferConv(Op op, std::span<const TensorType> in, const Attributes& attrs);
}  // namespace detail

}  // namespace kiln::ir
