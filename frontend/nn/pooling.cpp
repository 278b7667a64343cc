// nn::MaxPool2d, nn::AvgPool2d, nn::AdaptiveAvgPool2d and nn::Flatten
// (frontend/nn/pooling.h).
#include "frontend/nn/pooling.h"

namespace kiln::nn {

MaxPool2dImpl::MaxPool2dImpl(MaxPool2dOptions options_) : Module("MaxPool2d"), options(options_) {}

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return maxPool2d(input, options.kernel, options.stride, options.padding, options.dilation, options.ceilMode);
}

AvgPool2dImpl::AvgPool2dImpl(AvgPool2dOptions options_) : Module("AvgPool2d"), options(options_) {}

Tensor AvgPool2dImpl::forward(const Tensor& input) {
  return avgPool2d(input, options.kernel, options.stride, options.padding, options.ceilMode, options.countIncludePad,
                   options.divisorOverride);
}

AdaptiveAvgPool2dImpl::AdaptiveAvgPool2dImpl(Size2 outputSize_)
    : Module("AdaptiveAvgPool2d"), outputSize(outputSize_) {}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) { return adaptiveAvgPool2d(input, outputSize); }

Tensor FlattenImpl::forward(const Tensor& input) { return input.flatten(startDim, endDim); }

}  // namespace kiln::nn
