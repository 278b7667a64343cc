// The ResNets of tools/common/resnet.h, written after torchvision's
// resnet.py: the same submodules registered in the same order, so that
// stateDict() lists torchvision's keys in torchvision's order.
#include "tools/common/resnet.h"

#include <memory>
#include <utility>

#include "runtime/error.h"

namespace kiln::tools {

namespace {
nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Conv2d(in, out, std::array<int64_t, 2>{3, 3},
                    Conv2dOptions{.stride = {stride, stride}, .padding = std::array<int64_t, 2>{1, 1}},
                    /*bias=*/false);
}

nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Conv2d(in, out, std::array<int64_t, 2>{1, 1}, Conv2dOptions{.stride = {stride, stride}},
                    /*bias=*/false);
}
}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample_)
    : Module("BasicBlock") {
  conv1 = registerModule("conv1", conv3x3(inplanes, planes, stride));
  bn1 = registerModule("bn1", nn::BatchNorm2d(planes));
  relu = registerModule("relu", nn::ReLU());
  conv2 = registerModule("conv2", conv3x3(planes, planes));
  bn2 = registerModule("bn2", nn::BatchNorm2d(planes));
  if (downsample_) downsample = registerModule("downsample", std::move(downsample_));
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  Tensor out = relu(bn1(conv1(x)));
  out = bn2(conv2(out));
  return relu(out + (downsample ? downsample(x) : x));
}

BottleneckImpl::BottleneckImpl(int64_t inplanes, int64_t planes, int64_t stride, nn::Sequential downsample_)
    : Module("Bottleneck") {
  conv1 = registerModule("conv1", conv1x1(inplanes, planes));
  bn1 = registerModule("bn1", nn::BatchNorm2d(planes));
  conv2 = registerModule("conv2", conv3x3(planes, planes, stride));
  bn2 = registerModule("bn2", nn::BatchNorm2d(planes));
  conv3 = registerModule("conv3", conv1x1(planes, planes * kExpansion));
  bn3 = registerModule("bn3", nn::BatchNorm2d(planes * kExpansion));
  relu = registerModule("relu", nn::ReLU());
  if (downsample_) downsample = registerModule("downsample", std::move(downsample_));
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  Tensor out = relu(bn1(conv1(x)));
  out = relu(bn2(conv2(out)));
  out = bn3(conv3(out));
  return relu(out + (downsample ? downsample(x) : x));
}

ResNetImpl::ResNetImpl(ResNetBlock block, std::array<int64_t, 4> layers, int64_t numClasses) : Module("ResNet") {
  const int64_t expansion = block == ResNetBlock::basic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
  conv1 = registerModule("conv1", nn::Conv2d(3, 64, std::array<int64_t, 2>{7, 7},
                                             Conv2dOptions{.stride = {2, 2}, .padding = std::array<int64_t, 2>{3, 3}},
                                             /*bias=*/false));
  bn1 = registerModule("bn1", nn::BatchNorm2d(64));
  relu = registerModule("relu", nn::ReLU());
  maxpool = registerModule(
      "maxpool", nn::MaxPool2d(nn::MaxPool2dOptions{.kernel = {3, 3}, .stride = {{2, 2}}, .padding = {1, 1}}));
  layer1 = registerModule("layer1", makeLayer(block, 64, layers[0], 1));
  layer2 = registerModule("layer2", makeLayer(block, 128, layers[1], 2));
  layer3 = registerModule("layer3", makeLayer(block, 256, layers[2], 2));
  layer4 = registerModule("layer4", makeLayer(block, 512, layers[3], 2));
  avgpool = registerModule("avgpool", nn::AdaptiveAvgPool2d(Size2{1, 1}));
  fc = registerModule("fc", nn::Linear(512 * expansion, numClasses));

  // torchvision's initialization, after the modules drew nn's defaults:
  // He normal (fan_out, relu) for the convolutions, ones and zeros for the
  // batch norms; fc keeps nn::Linear's.
  apply([](nn::Module& m) {
    if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(&m)) {
      nn::init::kaimingNormal_(conv->weight, 0.0, nn::init::FanMode::fanOut, nn::init::Nonlinearity::relu);
    } else if (auto* bn = dynamic_cast<nn::BatchNorm2dImpl*>(&m)) {
      nn::init::ones_(bn->weight);
      nn::init::zeros_(bn->bias);
    }
  });
}

nn::Sequential ResNetImpl::makeLayer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride) {
  const int64_t expansion = block == ResNetBlock::basic ? BasicBlockImpl::kExpansion : BottleneckImpl::kExpansion;
  auto makeBlock = [&](int64_t s, nn::Sequential downsample) -> std::shared_ptr<nn::Module> {
    if (block == ResNetBlock::basic)
      return std::make_shared<BasicBlockImpl>(inplanes_, planes, s, std::move(downsample));
    return std::make_shared<BottleneckImpl>(inplanes_, planes, s, std::move(downsample));
  };
  nn::Sequential downsample{nullptr};
  if (stride != 1 || inplanes_ != planes * expansion)
    downsample = nn::Sequential(conv1x1(inplanes_, planes * expansion, stride), nn::BatchNorm2d(planes * expansion));
  nn::Sequential layer;
  layer->push_back(makeBlock(stride, downsample));
  inplanes_ = planes * expansion;
  for (int64_t i = 1; i < blocks; ++i) layer->push_back(makeBlock(1, nullptr));
  return layer;
}

Tensor ResNetImpl::forward(const Tensor& x) {
  Tensor h = maxpool(relu(bn1(conv1(x))));
  h = layer4(layer3(layer2(layer1(h))));
  return fc(avgpool(h).flatten(1));
}

ResNet resnet18(int64_t numClasses) {
  return ResNet(ResNetBlock::basic, std::array<int64_t, 4>{2, 2, 2, 2}, numClasses);
}

ResNet resnet50(int64_t numClasses) {
  return ResNet(ResNetBlock::bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, numClasses);
}

ResNetTrainStep::ResNetTrainStep(Sizes s)
    : model_(resnet18(s.classes)), optimizer_(model_->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9}) {}

Tensor ResNetTrainStep::operator()(const Tensor& x, const Tensor& labels) {
  optimizer_.zeroGrad();
  Tensor loss = crossEntropy(model_(x), labels);
  loss.backward();
  optimizer_.step();
  return loss;
}

std::vector<ir::TensorType> ResNetTrainStep::inputTypes(Sizes s) {
  return {{DType::f32, {s.batch, 3, s.image, s.image}, Device::cpu()}, {DType::i64, {s.batch}, Device::cpu()}};
}

double resnet18ForwardFlops(ResNetSizes s) {
  // Output size of a k x k window with this stride and padding.
  auto out = [](int64_t size, int64_t k, int64_t stride, int64_t pad) { return (size + 2 * pad - k) / stride + 1; };
  // 2 * N * Cout * HO * WO * Cin * k * k.
  auto conv = [&](int64_t in, int64_t outC, int64_t k, int64_t size) {
    return 2.0 * static_cast<double>(s.batch * outC * size * size * in * k * k);
  };
  int64_t size = out(s.image, 7, 2, 3);
  double flops = conv(3, 64, 7, size);
  size = out(size, 3, 2, 1);  // maxpool
  int64_t in = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage, stride = stage == 0 ? 1 : 2;
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t bs = b == 0 ? stride : 1;
      const int64_t o = out(size, 3, bs, 1);
      flops += conv(in, planes, 3, o) + conv(planes, planes, 3, o);
      if (b == 0 && (bs != 1 || in != planes)) flops += conv(in, planes, 1, o);
      in = planes;
      size = o;
    }
  }
  return flops + 2.0 * static_cast<double>(s.batch * 512 * s.classes);
}

}  // namespace kiln::tools
