// tools/common/resnet.h against torchvision: ResNet-18's state dict has
// torchvision's 122 keys in torchvision's order (written out below from
// torchvision's resnet.py), ResNet-18 and ResNet-50 have torchvision's
// published parameter counts, the initialization is torchvision's, and the
// model runs forward, compiled as eager, and trains.
#include "tools/common/resnet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::tools {
namespace {

// torchvision.models.resnet18().state_dict().keys(), in order: each module's
// parameters, then its buffers, then its children in the order resnet.py
// assigns them (BasicBlock: conv1, bn1, relu, conv2, bn2, downsample).
const std::vector<std::string> kResNet18Keys = {
    "conv1.weight",
    "bn1.weight",
    "bn1.bias",
    "bn1.running_mean",
    "bn1.running_var",
    "bn1.num_batches_tracked",
    "layer1.0.conv1.weight",
    "layer1.0.bn1.weight",
    "layer1.0.bn1.bias",
    "layer1.0.bn1.running_mean",
    "layer1.0.bn1.running_var",
    "layer1.0.bn1.num_batches_tracked",
    "layer1.0.conv2.weight",
    "layer1.0.bn2.weight",
    "layer1.0.bn2.bias",
    "layer1.0.bn2.running_mean",
    "layer1.0.bn2.running_var",
    "layer1.0.bn2.num_batches_tracked",
    "layer1.1.conv1.weight",
    "layer1.1.bn1.weight",
    "layer1.1.bn1.bias",
    "layer1.1.bn1.running_mean",
    "layer1.1.bn1.running_var",
    "layer1.1.bn1.num_batches_tracked",
    "layer1.1.conv2.weight",
    "layer1.1.bn2.weight",
    "layer1.1.bn2.bias",
    "layer1.1.bn2.running_mean",
    "layer1.1.bn2.running_var",
    "layer1.1.bn2.num_batches_tracked",
    "layer2.0.conv1.weight",
    "layer2.0.bn1.weight",
    "layer2.0.bn1.bias",
    "layer2.0.bn1.running_mean",
    "layer2.0.bn1.running_var",
    "layer2.0.bn1.num_batches_tracked",
    "layer2.0.conv2.weight",
    "layer2.0.bn2.weight",
    "layer2.0.bn2.bias",
    "layer2.0.bn2.running_mean",
    "layer2.0.bn2.running_var",
    "layer2.0.bn2.num_batches_tracked",
    "layer2.0.downsample.0.weight",
    "layer2.0.downsample.1.weight",
    "layer2.0.downsample.1.bias",
    "layer2.0.downsample.1.running_mean",
    "layer2.0.downsample.1.running_var",
    "layer2.0.downsample.1.num_batches_tracked",
    "layer2.1.conv1.weight",
    "layer2.1.bn1.weight",
    "layer2.1.bn1.bias",
    "layer2.1.bn1.running_mean",
    "layer2.1.bn1.running_var",
    "layer2.1.bn1.num_batches_tracked",
    "layer2.1.conv2.weight",
    "layer2.1.bn2.weight",
    "layer2.1.bn2.bias",
    "layer2.1.bn2.running_mean",
    "layer2.1.bn2.running_var",
    "layer2.1.bn2.num_batches_tracked",
    "layer3.0.conv1.weight",
    "layer3.0.bn1.weight",
    "layer3.0.bn1.bias",
    "layer3.0.bn1.running_mean",
    "layer3.0.bn1.running_var",
    "layer3.0.bn1.num_batches_tracked",
    "layer3.0.conv2.weight",
    "layer3.0.bn2.weight",
    "layer3.0.bn2.bias",
    "layer3.0.bn2.running_mean",
    "layer3.0.bn2.running_var",
    "layer3.0.bn2.num_batches_tracked",
    "layer3.0.downsample.0.weight",
    "layer3.0.downsample.1.weight",
    "layer3.0.downsample.1.bias",
    "layer3.0.downsample.1.running_mean",
    "layer3.0.downsample.1.running_var",
    "layer3.0.downsample.1.num_batches_tracked",
    "layer3.1.conv1.weight",
    "layer3.1.bn1.weight",
    "layer3.1.bn1.bias",
    "layer3.1.bn1.running_mean",
    "layer3.1.bn1.running_var",
    "layer3.1.bn1.num_batches_tracked",
    "layer3.1.conv2.weight",
    "layer3.1.bn2.weight",
    "layer3.1.bn2.bias",
    "layer3.1.bn2.running_mean",
    "layer3.1.bn2.running_var",
    "layer3.1.bn2.num_batches_tracked",
    "layer4.0.conv1.weight",
    "layer4.0.bn1.weight",
    "layer4.0.bn1.bias",
    "layer4.0.bn1.running_mean",
    "layer4.0.bn1.running_var",
    "layer4.0.bn1.num_batches_tracked",
    "layer4.0.conv2.weight",
    "layer4.0.bn2.weight",
    "layer4.0.bn2.bias",
    "layer4.0.bn2.running_mean",
    "layer4.0.bn2.running_var",
    "layer4.0.bn2.num_batches_tracked",
    "layer4.0.downsample.0.weight",
    "layer4.0.downsample.1.weight",
    "layer4.0.downsample.1.bias",
    "layer4.0.downsample.1.running_mean",
    "layer4.0.downsample.1.running_var",
    "layer4.0.downsample.1.num_batches_tracked",
    "layer4.1.conv1.weight",
    "layer4.1.bn1.weight",
    "layer4.1.bn1.bias",
    "layer4.1.bn1.running_mean",
    "layer4.1.bn1.running_var",
    "layer4.1.bn1.num_batches_tracked",
    "layer4.1.conv2.weight",
    "layer4.1.bn2.weight",
    "layer4.1.bn2.bias",
    "layer4.1.bn2.running_mean",
    "layer4.1.bn2.running_var",
    "layer4.1.bn2.num_batches_tracked",
    "fc.weight",
    "fc.bias",
};

int64_t parameterCount(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

TEST(ResNet, Resnet18StateDictHasTorchvisionsKeys) {
  ASSERT_EQ(kResNet18Keys.size(), 122u);
  ResNet model = resnet18();
  EXPECT_EQ(model->stateDict().keys(), kResNet18Keys);
}

TEST(ResNet, ParameterCountsAreTorchvisions) {
  // torchvision's model table: resnet18 11,689,512; resnet50 25,557,032.
  EXPECT_EQ(parameterCount(*resnet18()), 11'689'512);
  ResNet r50 = resnet50();
  EXPECT_EQ(parameterCount(*r50), 25'557'032);
  // 53 convolutions and batch norms (5 entries each), fc: 53 + 53 * 5 + 2.
  const nn::StateDict dict = r50->stateDict();
  EXPECT_EQ(dict.size(), 320u);
  // A bottleneck's stride is on its 3x3 convolution (torchvision's v1.5).
  EXPECT_EQ(dict["layer3.0.conv2.weight"].shape(), (Shape{256, 256, 3, 3}));
  EXPECT_EQ(dict["layer3.0.conv3.weight"].shape(), (Shape{1024, 256, 1, 1}));
  EXPECT_EQ(dict["layer3.0.downsample.0.weight"].shape(), (Shape{1024, 512, 1, 1}));
  EXPECT_EQ(dict["fc.weight"].shape(), (Shape{1000, 2048}));
  EXPECT_EQ(r50->layer3->at<BottleneckImpl>(0).conv2->options.stride, (std::array<int64_t, 2>{2, 2}));
  EXPECT_EQ(r50->layer3->at<BottleneckImpl>(0).conv1->options.stride, (std::array<int64_t, 2>{1, 1}));
}

double mean(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

double stddev(const std::vector<float>& v) {
  const double m = mean(v);
  double s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST(ResNet, InitializationIsTorchvisions) {
  manualSeed(0);
  ResNet model = resnet18();
  const nn::StateDict dict = model->stateDict();
  // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std √2 / √(out·kh·kw).
  for (const auto& [name, fanOut] :
       std::vector<std::pair<std::string, double>>{{"conv1.weight", 64 * 49},
                                                   {"layer1.0.conv1.weight", 64 * 9},
                                                   {"layer4.1.conv2.weight", 512 * 9},
                                                   {"layer2.0.downsample.0.weight", 128}}) {
    SCOPED_TRACE(name);
    const std::vector<float> w = dict[name].toVector<float>();
    const double expected = std::sqrt(2.0 / fanOut);
    EXPECT_NEAR(stddev(w), expected, 0.05 * expected);
    EXPECT_NEAR(mean(w), 0.0, 0.05 * expected);
  }
  for (const std::string bn : {"bn1", "layer3.1.bn2", "layer4.0.downsample.1"}) {
    SCOPED_TRACE(bn);
    for (float x : dict[bn + ".weight"].toVector<float>()) ASSERT_EQ(x, 1.0f);
    for (float x : dict[bn + ".bias"].toVector<float>()) ASSERT_EQ(x, 0.0f);
    for (float x : dict[bn + ".running_var"].toVector<float>()) ASSERT_EQ(x, 1.0f);
  }
  // fc keeps nn.Linear's U(-1/√512, 1/√512).
  const std::vector<float> fc = dict["fc.weight"].toVector<float>();
  const double bound = 1 / std::sqrt(512.0);
  for (float x : fc) ASSERT_LE(std::abs(x), bound);
  EXPECT_NEAR(stddev(fc), bound / std::sqrt(3.0), 0.02 * bound);
}

TEST(ResNet, Resnet18ForwardFlopsAreTorchvisions) {
  // torchvision's table: resnet18 1.81 GFLOPS (multiply-adds) at 224x224.
  EXPECT_NEAR(resnet18ForwardFlops({.batch = 1, .image = 224, .classes = 1000}) / 2, 1.814e9, 0.01e9);
}

TEST(ResNet, Resnet18RunsEagerAndCompiledAlike) {
  manualSeed(1);
  ResNet model = resnet18(10);
  model->eval();
  Generator g(3);
  const Tensor x = randn({2, 3, 32, 32}, g);
  NoGradGuard noGrad;
  const Tensor eager = model(x);
  ASSERT_EQ(eager.shape(), (Shape{2, 10}));
  auto f = compile([&model](const Tensor& in) { return model(in); });
  const Tensor compiled = f(x);
  const std::vector<float> e = eager.toVector<float>(), c = compiled.toVector<float>();
  double scale = 0;
  for (float v : e) scale = std::max(scale, static_cast<double>(std::abs(v)));
  ASSERT_GT(scale, 0);
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(c[i], e[i], 1e-4 * (1 + scale)) << i;
}

// The largest |a - b| over |b|'s largest, for outputs of two libraries.
double relativeError(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.toVector<float>(), y = b.toVector<float>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(x[i] - y[i])));
    scale = std::max(scale, static_cast<double>(std::abs(y[i])));
  }
  return diff / scale;
}

// torchvision's ResNet-18 (10 classes), its state dict loaded into kiln's
// strictly (same names, shapes and dtypes, num_batches_tracked i64),
// computes what torchvision computed on the same input in both modes, and
// a training-mode call leaves the running statistics torchvision's did.
// The file comes from scripts/resnet_reference.py, which needs torch and
// torchvision; without KILN_RESNET18_REFERENCE naming it, a skip.
TEST(ResNet, Resnet18MatchesTorchvision) {
  const char* path = std::getenv("KILN_RESNET18_REFERENCE");
  if (!path || !*path) GTEST_SKIP() << "KILN_RESNET18_REFERENCE unset (scripts/resnet_reference.py writes the file)";
  const SafetensorsFile file = load(path);
  nn::StateDict dict;
  for (const auto& [name, tensor] : file.tensors)
    if (name.find("input.") != 0 && name.find("output.") != 0 && name.find("after_train.") != 0)
      dict.insert(name, tensor);
  ResNet model = resnet18(10);
  model->loadStateDict(dict);
  const Tensor x = file.tensors["input.x"];
  model->eval();
  {
    NoGradGuard noGrad;
    EXPECT_LT(relativeError(model(x), file.tensors["output.eval"]), 1e-4);
    model->train();
    EXPECT_LT(relativeError(model(x), file.tensors["output.train"]), 1e-4);
  }
  const nn::StateDict after = model->stateDict();
  for (const auto& [name, tensor] : file.tensors) {
    if (name.find("after_train.") != 0) continue;
    SCOPED_TRACE(name);
    EXPECT_LT(relativeError(after[name.substr(std::string("after_train.").size())], tensor), 1e-4);
  }
}

TEST(ResNet, TrainStepLowersTheLossOnOneBatch) {
  manualSeed(2);
  ResNetTrainStep step({.batch = 4, .image = 32, .classes = 10});
  Generator g(5);
  const Tensor x = randn({4, 3, 32, 32}, g);
  const Tensor y = fromVector(std::vector<int64_t>{1, 7, 3, 3}, Shape{4});
  const float first = step(x, y).item<float>();
  // Untrained, the loss is near ln 10.
  EXPECT_NEAR(first, std::log(10.0), 1.5);
  float last = first;
  for (int i = 0; i < 4; ++i) last = step(x, y).item<float>();
  EXPECT_LT(last, 0.5 * first);
  // Training mode updated the batch norms' running statistics.
  const nn::StateDict dict = step.model()->stateDict();
  EXPECT_EQ(dict["bn1.num_batches_tracked"].item<int64_t>(), 5);
  EXPECT_NE(dict["bn1.running_mean"].toVector<float>()[0], 0.0f);
}

}  // namespace
}  // namespace kiln::tools
