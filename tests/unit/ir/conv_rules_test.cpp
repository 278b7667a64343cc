// The type rules of conv2d, conv_transpose2d and conv2d_backward_weight
// (ir/conv.h): result shapes, and each attribute or operand mistake's
// message (the frontend's own checks come first for kiln::conv2d; these
// guard graphs from the parser and the gradient formulas).
#include <gtest/gtest.h>

#include <vector>

#include "common/error_of.h"
#include "ir/conv.h"
#include "ir/op_registry.h"

namespace kiln::ir {
namespace {

const Device cpu = Device::cpu();

Attributes attrs(Op op, std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0, 0, 0},
                 std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1) {
  Attributes a = {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
  if (op == Op::conv_transpose2d) a["output_padding"] = std::vector<int64_t>{0, 0};
  if (op == Op::conv2d_backward_weight) a["kernel"] = std::vector<int64_t>{3, 3};
  return a;
}

std::string errorOfInfer(Op op, std::vector<TensorType> in, const Attributes& a) {
  return errorOf([&] { inferType(op, in, a); });
}

TEST(ConvRules, ResultShapes) {
  const TensorType x{DType::f32, {2, 4, 9, 8}, cpu}, w{DType::f32, {6, 2, 3, 3}, cpu};
  EXPECT_EQ(inferType(Op::conv2d, std::vector<TensorType>{x, w}, attrs(Op::conv2d, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2)),
            (TensorType{DType::f32, {2, 6, 5, 4}, cpu}));
  const TensorType y{DType::f32, {2, 6, 5, 4}, cpu}, wt{DType::f32, {6, 2, 3, 3}, cpu};
  Attributes t = attrs(Op::conv_transpose2d, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3);
  t["output_padding"] = std::vector<int64_t>{0, 1};
  EXPECT_EQ(inferType(Op::conv_transpose2d, std::vector<TensorType>{y, wt}, t),
            (TensorType{DType::f32, {2, 6, 9, 8}, cpu}));
  EXPECT_EQ(inferType(Op::conv2d_backward_weight, std::vector<TensorType>{x, y},
                      attrs(Op::conv2d_backward_weight, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2)),
            (TensorType{DType::f32, {6, 2, 3, 3}, cpu}));
}

TEST(ConvRules, MistakesNameTheOpTheAttributeAndTheTypes) {
  const TensorType x{DType::f32, {1, 4, 6, 6}, cpu}, w{DType::f32, {2, 4, 3, 3}, cpu};
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, w}, attrs(Op::conv2d, {0, 1})), "conv2d: stride must be >= 1, got [0, 1]");
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, w}, attrs(Op::conv2d, {1, 1}, {0, -1, 0, 0})),
            "conv2d: padding must be >= 0, got [0, -1, 0, 0]");
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, w}, attrs(Op::conv2d, {1, 1}, {0, 0, 0, 0}, {1, 0})),
            "conv2d: dilation must be >= 1, got [1, 0]");
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, w}, attrs(Op::conv2d, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0)),
            "conv2d: groups must be >= 1, got 0");
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, w}, attrs(Op::conv2d, {1, 1}, {0, 0})),
            "conv2d: attribute padding must have 4 values, got [0, 0]");
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, TensorType{DType::f64, {2, 4, 3, 3}, cpu}}, attrs(Op::conv2d)),
            "conv2d: expected both operands of one dtype, got f32[1,4,6,6]@cpu and f64[2,4,3,3]@cpu");
  EXPECT_EQ(errorOfInfer(Op::conv2d, {x, TensorType{DType::f32, {2, 4, 3}, cpu}}, attrs(Op::conv2d)),
            "conv2d: expected operands of rank 4 (NCHW), got f32[1,4,6,6]@cpu and f32[2,4,3]@cpu");
  Attributes op = attrs(Op::conv_transpose2d);
  op["output_padding"] = std::vector<int64_t>{1, 0};
  EXPECT_EQ(errorOfInfer(Op::conv_transpose2d, {x, TensorType{DType::f32, {4, 2, 3, 3}, cpu}}, op),
            "conv_transpose2d: output_padding must be >= 0 and smaller than the stride, got output_padding [1, 0], "
            "stride [1, 1]");
  EXPECT_EQ(
      errorOfInfer(Op::conv_transpose2d, {x, TensorType{DType::f32, {3, 2, 3, 3}, cpu}}, attrs(Op::conv_transpose2d)),
      "conv_transpose2d: expected a weight of 4 input channels (dim 0), got f32[1,4,6,6]@cpu and "
      "f32[3,2,3,3]@cpu");
  EXPECT_EQ(errorOfInfer(Op::conv2d_backward_weight, {x, TensorType{DType::f32, {1, 2, 5, 5}, cpu}},
                         attrs(Op::conv2d_backward_weight)),
            "conv2d_backward_weight: a kernel [3, 3] over x gives an output of 4x4, but the output's gradient is "
            "f32[1,4,6,6]@cpu and f32[1,2,5,5]@cpu");
  EXPECT_EQ(errorOfInfer(Op::conv2d_backward_weight, {x, TensorType{DType::f32, {2, 2, 4, 4}, cpu}},
                         attrs(Op::conv2d_backward_weight)),
            "conv2d_backward_weight: expected x and the output's gradient of one batch size, got f32[1,4,6,6]@cpu "
            "and f32[2,2,4,4]@cpu");
}

}  // namespace
}  // namespace kiln::ir
