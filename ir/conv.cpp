// The rules of the convolution ops (ir/conv.h).
#include "ir/conv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/error.h"

namespace kiln::ir {

namespace {
template <size_t N>
std::array<int64_t, N> listAttr(const Attributes& attrs, const char* name, std::string_view op) {
  const std::vector<int64_t>& v = intListAttr(attrs, name, op);
  KILN_CHECK(v.size() == N, "{}: attribute {} must have {} values, got [{}]", op, name, N, fmt::join(v, ", "));
  std::array<int64_t, N> a{};
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

std::string typesStr(std::span<const TensorType> types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i == 0 ? "" : " and ") + types[i].str();
  return s;
}
}  // namespace

ConvAttrs convAttrs(Op op, const Attributes& attrs) {
  const std::string_view name = opName(op);
  ConvAttrs a;
  a.stride = listAttr<2>(attrs, "stride", name);
  a.padding = listAttr<4>(attrs, "padding", name);
  a.dilation = listAttr<2>(attrs, "dilation", name);
  a.groups = intAttr(attrs, "groups", name);
  for (int64_t s : a.stride) KILN_CHECK(s >= 1, "{}: stride must be >= 1, got [{}]", name, fmt::join(a.stride, ", "));
  for (int64_t d : a.dilation)
    KILN_CHECK(d >= 1, "{}: dilation must be >= 1, got [{}]", name, fmt::join(a.dilation, ", "));
  for (int64_t p : a.padding)
    KILN_CHECK(p >= 0, "{}: padding must be >= 0, got [{}]", name, fmt::join(a.padding, ", "));
  KILN_CHECK(a.groups >= 1, "{}: groups must be >= 1, got {}", name, a.groups);
  if (op == Op::conv_transpose2d) {
    a.outputPadding = listAttr<2>(attrs, "output_padding", name);
    for (int d = 0; d < 2; ++d)
      KILN_CHECK(a.outputPadding[d] >= 0 && a.outputPadding[d] < a.stride[d],
                 "{}: output_padding must be >= 0 and smaller than the stride, got output_padding [{}], stride [{}]",
                 name, fmt::join(a.outputPadding, ", "), fmt::join(a.stride, ", "));
  }
  if (op == Op::conv2d_backward_weight) {
    a.kernel = listAttr<2>(attrs, "kernel", name);
    for (int64_t k : a.kernel) KILN_CHECK(k >= 1, "{}: kernel must be >= 1, got [{}]", name, fmt::join(a.kernel, ", "));
  }
  return a;
}

Attributes convAttributes(Op op, const ConvAttrs& a) {
  Attributes attrs = {{"stride", std::vector<int64_t>(a.stride.begin(), a.stride.end())},
                      {"padding", std::vector<int64_t>(a.padding.begin(), a.padding.end())},
                      {"dilation", std::vector<int64_t>(a.dilation.begin(), a.dilation.end())},
                      {"groups", a.groups}};
  if (op == Op::conv_transpose2d)
    attrs["output_padding"] = std::vector<int64_t>(a.outputPadding.begin(), a.outputPadding.end());
  if (op == Op::conv2d_backward_weight) attrs["kernel"] = std::vector<int64_t>(a.kernel.begin(), a.kernel.end());
  return attrs;
}

int64_t convOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after, int64_t dilation) {
  const int64_t span = in + before + after - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

int64_t convTransposeOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t before, int64_t after,
                                int64_t dilation, int64_t outputPadding) {
  return (in - 1) * stride - before - after + dilation * (kernel - 1) + outputPadding + 1;
}

namespace detail {

TensorType inferConv(Op op, std::span<const TensorType> in, const Attributes& attrs) {
  const std::string_view name = opName(op);
  const ConvAttrs a = convAttrs(op, attrs);
  const std::string what = typesStr(in);
  KILN_CHECK(in[1].device == in[0].device, "{}: expected both operands on the same device, got {}", name, what);
  KILN_CHECK(in[0].dtype == in[1].dtype, "{}: expected both operands of one dtype, got {}", name, what);
  checkDTypeClass(op, in[0].dtype, what);
  KILN_CHECK(in[0].rank() == 4 && in[1].rank() == 4, "{}: expected operands of rank 4 (NCHW), got {}", name, what);
  const Shape& s0 = in[0].shape;
  const Shape& s1 = in[1].shape;
  const int64_t g = a.groups;
  auto outSize = [&](int d, int64_t inSize, int64_t kernel) {
    return convOutputSize(inSize, kernel, a.stride[d], a.padding[d], a.padding[d + 2], a.dilation[d]);
  };
  if (op == Op::conv2d) {  // x [N, C, H, W], w [O, C/G, KH, KW]
    KILN_CHECK(s0[1] % g == 0 && s1[0] % g == 0,
               "{}: groups {} must divide the input channels and the output "
               "channels, got {}",
               name, g, what);
    KILN_CHECK(s1[1] * g == s0[1],
               "{}: expected a weight of {} input channels per group ({} channels, {} groups), "
               "got {}",
               name, s0[1] / g, s0[1], g, what);
    const int64_t ho = outSize(0, s0[2], s1[2]), wo = outSize(1, s0[3], s1[3]);
    KILN_CHECK(ho >= 1 && wo >= 1 && s1[2] >= 1 && s1[3] >= 1,
               "{}: the output would be {}x{}: the padded input is smaller than the dilated kernel, got {} with "
               "padding [{}], dilation [{}]",
               name, ho, wo, what, fmt::join(a.padding, ", "), fmt::join(a.dilation, ", "));
    return {in[0].dtype, {s0[0], s1[0], ho, wo}, in[0].device};
  }
  if (op == Op::conv_transpose2d) {  // x [N, Cin, H, W], w [Cin, Cout/G, KH, KW]
    KILN_CHECK(s0[1] == s1[0], "{}: expected a weight of {} input channels (dim 0), got {}", name, s0[1], what);
    KILN_CHECK(s0[1] % g == 0, "{}: groups {} must divide the input channels, got {}", name, g, what);
    const int64_t ho = convTransposeOutputSize(s0[2], s1[2], a.stride[0], a.padding[0], a.padding[2], a.dilation[0],
                                               a.outputPadding[0]);
    const int64_t wo = convTransposeOutputSize(s0[3], s1[3], a.stride[1], a.padding[1], a.padding[3], a.dilation[1],
                                               a.outputPadding[1]);
    KILN_CHECK(ho >= 1 && wo >= 1 && s1[2] >= 1 && s1[3] >= 1,
               "{}: the output would be {}x{}, got {} with padding [{}]", name, ho, wo, what,
               fmt::join(a.padding, ", "));
    return {in[0].dtype, {s0[0], s1[1] * g, ho, wo}, in[0].device};
  }
  // conv2d_backward_weight: x [N, C, H, W], dy [N, O, HO, WO]
  KILN_CHECK(s0[0] == s1[0], "{}: expected x and the output's gradient of one batch size, got {}", name, what);
  KILN_CHECK(s0[1] % g == 0 && s1[1] % g == 0,
             "{}: groups {} must divide the input channels and the output channels, got {}", name, g, what);
  const int64_t ho = outSize(0, s0[2], a.kernel[0]), wo = outSize(1, s0[3], a.kernel[1]);
  KILN_CHECK(ho == s1[2] && wo == s1[3],
             "{}: a kernel [{}] over x gives an output of {}x{}, but the output's gradient is {}", name,
             fmt::join(a.kernel, ", "), ho, wo, what);
  return {in[0].dtype, {s1[1], s0[1] / g, a.kernel[0], a.kernel[1]}, in[0].device};
}

}  // namespace detail

}  // namespace kiln::ir
