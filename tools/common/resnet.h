// ResNet-18 and ResNet-50 (He et al., 2015) as kiln nn modules, with
// torchvision's layer structure (v1.5: a bottleneck's stride on its 3x3
// convolution), its submodule names and its initialization, so that a
// torchvision state dict maps onto them name for name:
//
//   conv1, bn1, relu, maxpool, layer1..layer4, avgpool, fc
//   layerN.I.{conv1, bn1, conv2, bn2[, conv3, bn3]}, layerN.0.downsample.{0, 1}
//
// Convolutions have no bias and are drawn by kaimingNormal_(fan_out, relu);
// batch norms start at weight 1, bias 0; fc keeps nn::Linear's
// initialization. kiln-bench's resnet18_infer and resnet18_train_step run
// ResNet-18 (docs/benchmarks.md).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::tools {

/// ResNet-18's and -34's block: two 3x3 convolutions with a residual,
///   relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)).
class BasicBlockImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  /// `downsample` (empty: the identity) maps x to the block's output shape.
  BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample);
  Tensor forward(const Tensor& x) override;

  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  nn::ReLU relu{nullptr};
  nn::Conv2d conv2{nullptr};
  nn::BatchNorm2d bn2{nullptr};
  nn::Sequential downsample{nullptr};
};

/// ResNet-50's block: 1x1 down to `planes`, 3x3 (with the stride), 1x1 up to
/// 4 * planes, with a residual.
class BottleneckImpl : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample);
  Tensor forward(const Tensor& x) override;

  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  nn::Conv2d conv2{nullptr};
  nn::BatchNorm2d bn2{nullptr};
  nn::Conv2d conv3{nullptr};
  nn::BatchNorm2d bn3{nullptr};
  nn::ReLU relu{nullptr};
  nn::Sequential downsample{nullptr};
};

/// Which block a ResNet stacks.
enum class ResNetBlock { basic, bottleneck };

/// torchvision.models.ResNet: a 7x7 stem, four stages of blocks (64, 128,
/// 256, 512 planes; stride 2 from the second on), global average pooling
/// and a linear classifier. Input [N, 3, H, W], output [N, numClasses].
class ResNetImpl : public nn::Module {
 public:
  ResNetImpl(ResNetBlock block, std::array<int64_t, 4> layers, int64_t numClasses = 1000);
  Tensor forward(const Tensor& x) override;

  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  nn::ReLU relu{nullptr};
  nn::MaxPool2d maxpool{nullptr};
  nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};

 private:
  nn::Sequential makeLayer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride);
  int64_t inplanes_ = 64;
};
KILN_MODULE(ResNet);

/// torchvision.models.resnet18(): BasicBlock, [2, 2, 2, 2]; 11,689,512
/// parameters with 1000 classes.
ResNet resnet18(int64_t numClasses = 1000);
/// torchvision.models.resnet50(): Bottleneck, [3, 4, 6, 3]; 25,557,032
/// parameters with 1000 classes.
ResNet resnet50(int64_t numClasses = 1000);

/// Sizes of tools::ResNetTrainStep and of kiln-bench's resnet18 workloads.
struct ResNetSizes {
  int64_t batch = 8, image = 224, classes = 1000;
};

/// One training step of ResNet-18 in training mode: forward on images
/// [batch, 3, image, image], crossEntropy against class labels, backward(),
/// SGD with momentum 0.9 (lr 0.01), model and optimizer kept in the object
/// (the batch norms' running statistics are updated too). kiln-bench's
/// resnet18_train_step.
class ResNetTrainStep {
 public:
  using Sizes = ResNetSizes;
  /// Makes the model (initialized from the default generator) and the
  /// optimizer.
  explicit ResNetTrainStep(Sizes sizes = {});
  /// One step on x f32[batch, 3, image, image] and labels i64[batch];
  /// returns the loss (computed before the update).
  Tensor operator()(const Tensor& x, const Tensor& labels);
  /// The inputs' types: x and labels.
  static std::vector<ir::TensorType> inputTypes(Sizes sizes = {});
  const ResNet& model() const { return model_; }

 private:
  ResNet model_;
  optim::SGD optimizer_;
};

/// Floating-point operations (a multiply-add counts two) of one ResNet-18
/// forward pass on a batch of `sizes`, counting the convolutions and the
/// classifier (the matmuls; pooling, batch norm and the residual adds are
/// left out).
double resnet18ForwardFlops(ResNetSizes sizes = {});

}  // namespace kiln::tools
