// Pooling modules: nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d and
// nn::Flatten, as torch.nn's; they hold no parameters and call
// kiln::maxPool2d, kiln::avgPool2d, kiln::adaptiveAvgPool2d and
// Tensor::flatten. A pool with more than a kernel size takes its options
// struct, as libtorch's: `nn::MaxPool2d(nn::MaxPool2dOptions{.kernel = {3, 3},
// .stride = {{2, 2}}, .padding = {1, 1}})`.
#pragma once

#include <cstdint>
#include <optional>

#include "frontend/nn/module.h"
#include "frontend/pooling.h"

namespace kiln::nn {

/// torch.nn.MaxPool2d's arguments; stride unset means the kernel size.
struct MaxPool2dOptions {
  Size2 kernel{1, 1};
  std::optional<Size2> stride{};
  Size2 padding{0, 0};
  Size2 dilation{1, 1};
  bool ceilMode = false;
};

class MaxPool2dImpl : public Module {
 public:
  /// A square kernel, stride equal to it.
  explicit MaxPool2dImpl(int64_t kernel) : MaxPool2dImpl(MaxPool2dOptions{.kernel = {kernel, kernel}}) {}
  explicit MaxPool2dImpl(MaxPool2dOptions options);
  Tensor forward(const Tensor& input) override;

  const MaxPool2dOptions options;
};
KILN_MODULE(MaxPool2d);

/// torch.nn.AvgPool2d's arguments; stride unset means the kernel size.
struct AvgPool2dOptions {
  Size2 kernel{1, 1};
  std::optional<Size2> stride{};
  Size2 padding{0, 0};
  bool ceilMode = false;
  bool countIncludePad = true;
  std::optional<int64_t> divisorOverride{};
};

class AvgPool2dImpl : public Module {
 public:
  /// A square kernel, stride equal to it.
  explicit AvgPool2dImpl(int64_t kernel) : AvgPool2dImpl(AvgPool2dOptions{.kernel = {kernel, kernel}}) {}
  explicit AvgPool2dImpl(AvgPool2dOptions options);
  Tensor forward(const Tensor& input) override;

  const AvgPool2dOptions options;
};
KILN_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public Module {
 public:
  /// An outputSize x outputSize output.
  explicit AdaptiveAvgPool2dImpl(int64_t outputSize) : AdaptiveAvgPool2dImpl(Size2{outputSize, outputSize}) {}
  explicit AdaptiveAvgPool2dImpl(Size2 outputSize);
  Tensor forward(const Tensor& input) override;

  const Size2 outputSize;
};

/// A handle on an AdaptiveAvgPool2dImpl: `nn::AdaptiveAvgPool2d pool(1)`,
/// `nn::AdaptiveAvgPool2d pool({7, 7})`.
class AdaptiveAvgPool2d : public ModuleHolder<AdaptiveAvgPool2dImpl> {
 public:
  using ModuleHolder<AdaptiveAvgPool2dImpl>::ModuleHolder;
  // A braced size cannot go through the variadic constructor.
  explicit AdaptiveAvgPool2d(Size2 outputSize) : ModuleHolder(std::make_shared<AdaptiveAvgPool2dImpl>(outputSize)) {}
};

class FlattenImpl : public Module {
 public:
  /// Merges dims startDim..endDim, as torch.nn.Flatten (defaults 1, -1:
  /// everything but the batch dim).
  explicit FlattenImpl(int64_t startDim = 1, int64_t endDim = -1)
      : Module("Flatten"), startDim(startDim), endDim(endDim) {}
  Tensor forward(const Tensor& input) override;

  const int64_t startDim, endDim;
};
KILN_MODULE(Flatten);

}  // namespace kiln::nn
