// Autograd, nn, optim and kiln::compile on every test device: gradients
// flow across devices, gradcheck passes there, a model moved there trains
// as on the CPU, compiled equals eager there, and a compiled training step
// launches the CPU's number of kernels.
#include <gtest/gtest.h>

#include "device/device_list.h"
#include "runtime/executable.h"

namespace kiln::testing {
namespace {

class DeviceTraining : public DeviceTest {};

TEST_P(DeviceTraining, MovesBetweenDevicesCarryGradientsBack) {
  const Device dev = device();
  Tensor x = values({2, 3});
  x.setRequiresGrad();
  Tensor y = sum(x.to(dev) * 3.0);
  EXPECT_EQ(y.device(), dev);
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_EQ(x.grad().toVector(), std::vector<float>(6, 3.0f));
}

TEST_P(DeviceTraining, GradcheckPassesThere) {
  const Device dev = device();
  if (!runtime::deviceInterface(dev).properties().fp64) GTEST_SKIP() << dev.str() << " has no f64";
  const Tensor x = values({3, 4}).to(DType::f64).to(dev), w = values({4}, 0.5f).to(DType::f64).to(dev);
  x.setRequiresGrad();
  w.setRequiresGrad();
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) {
        return layerNorm(kiln::tanh(matmul(in[0], in[1].unsqueeze(1)) * in[0]), {4}) * sum(in[1]);
      },
      {x, w});
  EXPECT_TRUE(r.ok) << r.message;
}

/// Three AdamW steps of a small MLP with dropout on `device`; its parameters.
std::vector<Tensor> train(Device device) {
  manualSeed(3);
  nn::Sequential model(nn::Linear(8, 16), nn::ReLU(), nn::Dropout(0.25), nn::Linear(16, 4));
  model->to(device);
  optim::AdamW adam(model->parameters(), optim::AdamWOptions{.lr = 0.01});
  const Tensor x = values({5, 8}).to(device);
  const Tensor target = fromVector(std::vector<int64_t>{0, 3, 1, 2, 3}, Shape{5}).to(device);
  for (int step = 0; step < 3; ++step) {
    adam.zeroGrad();
    crossEntropy(model->forward(x), target).backward();
    adam.step();
  }
  return model->parameters();
}

TEST_P(DeviceTraining, AModuleMovedThereTrainsAsOnTheCpu) {
  const Device dev = device();
  const std::vector<Tensor> cpu = train(Device::cpu()), there = train(dev);
  ASSERT_EQ(cpu.size(), there.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(there[i].device(), dev);
    // The matmuls add in another order on a device (its BLAS): close, not equal.
    EXPECT_TRUE(allClose(there[i], cpu[i], 1e-4, 1e-5)) << "parameter " << i;
  }
}

TEST_P(DeviceTraining, CompiledEqualsEagerThere) {
  const Device dev = device();
  auto f = [](const Tensor& x, const Tensor& b) {
    return layerNorm(dropout(kiln::relu(x + b), 0.2), {8}) + sum(x, {0});
  };
  auto compiled = compile(f);
  const Tensor x = values({6, 8}).to(dev), b = values({8}, 0.5f).to(dev);
  manualSeed(9);
  const Tensor eager = f(x, b);
  manualSeed(9);
  const Tensor fused = compiled(x, b);
  EXPECT_EQ(fused.device(), dev);
  EXPECT_TRUE(sameBits(eager, fused));
  manualSeed(9);
  EXPECT_TRUE(allClose(fused, f(x.cpu(), b.cpu()), 1e-5, 1e-6)) << "the reductions add in another order";
}

TEST_P(DeviceTraining, ReluDropoutLayerNormBackwardEqualsTheCpu) {
  const Device dev = device();
  auto run = [](Device d) {
    Tensor x = values({8, 16}).to(d), w = values({16}, 0.5f).to(d), b = values({16}, 0.25f).to(d);
    for (const Tensor* t : {&x, &w, &b}) t->setRequiresGrad();
    manualSeed(11);
    const Tensor y = layerNorm(dropout(kiln::relu(x), 0.1), {16}, w, b);
    sum(y * values({8, 16}, 0.3f).to(d)).backward();
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), there = run(dev);
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(there[i].device(), dev);
    EXPECT_TRUE(allClose(there[i], cpu[i], 1e-5, 1e-6)) << "result " << i;
  }
}

TEST_P(DeviceTraining, ACompiledTrainingStepLaunchesTheCpusKernelCount) {
  const Device dev = device();
  auto kernelsOfAStep = [](Device d) {
    manualSeed(5);
    nn::Sequential model(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 4));
    model->to(d);
    optim::AdamW adam(model->parameters(), optim::AdamWOptions{.lr = 0.01});
    auto step = compile(
        [&](const Tensor& x, const Tensor& target) {
          adam.zeroGrad();
          Tensor loss = crossEntropy(model->forward(x), target);
          loss.backward();
          adam.step();
          return loss;
        },
        CompileOptions{.graphReplay = runtime::GraphReplay::off});  // kernel by kernel (replay_test.cpp replays)
    const Tensor x = values({5, 8}).to(d);
    const Tensor target = fromVector(std::vector<int64_t>{0, 3, 1, 2, 3}, Shape{5}).to(d);
    step(x, target);
    const int64_t before = runtime::kernelLaunchCount();
    const Tensor loss = step(x, target);
    return std::tuple{runtime::kernelLaunchCount() - before, loss.cpu().item<float>(), step.lastNumEpilogues()};
  };
  const auto [cpuKernels, cpuLoss, cpuEpilogues] = kernelsOfAStep(Device::cpu());
  const auto [kernels, loss, epilogues] = kernelsOfAStep(dev);
  // Off the CPU, plus one upload of the step's per-call numbers (Note
  // [Per-call values are uploaded together]) and a launch of each kernel
  // the CPU runs as a matmul's epilogue (Note [Matmul epilogues]): the
  // first layer's bias and ReLU at least (the second's bias is fused into
  // the cross-entropy's row kernel).
  EXPECT_GE(cpuEpilogues, 1);
  EXPECT_EQ(epilogues, dev.isCpu() ? cpuEpilogues : 0);
  EXPECT_EQ(kernels, cpuKernels + (dev.isCpu() ? 0 : 1 + cpuEpilogues));
  EXPECT_NEAR(loss, cpuLoss, 1e-5);
}

TEST_P(DeviceTraining, ACompiledFunctionRecompilesForAnotherDevice) {
  const Device dev = device();
  auto f = compile([](const Tensor& x) { return kiln::exp(x) * 2.0; });
  const Tensor x = values({4});
  EXPECT_TRUE(sameBits(f(x), kiln::exp(x) * 2.0));
  EXPECT_EQ(f.numCompiles(), 1);
  const Tensor y = f(x.to(dev));
  EXPECT_EQ(y.device(), dev);
  EXPECT_EQ(f.numCompiles(), dev.isCpu() ? 1 : 2) << "the guards include the inputs' devices";
  EXPECT_TRUE(sameBits(y, kiln::exp(x) * 2.0));
}

KILN_INSTANTIATE_DEVICE_TESTS(DeviceTraining);

}  // namespace
}  // namespace kiln::testing
