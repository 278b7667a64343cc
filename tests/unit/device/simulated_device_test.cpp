// The device seam, tested on a simulated device (simulated_device.h) whose
// memory handles are not host addresses and whose work is deferred until
// the host waits: everything above runtime/ that runs there — factories,
// reads, eager ops of every kind, views and copy_, moves between devices,
// autograd, nn::Module::to, an optimizer, kiln::compile — must reach memory
// only through the device interface, wait before reading, and compute the
// CPU's bits.
#include "unit/device/simulated_device.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

using testing::simulatedCounters;
using testing::simulatedDevice;

/// Bit-for-bit equality of two tensors' values (read from their devices).
::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).toVector<double>(), y = b.to(DType::f64).toVector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0 && !(std::isnan(x[i]) && std::isnan(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

Tensor values(const Shape& shape, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(ir::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((static_cast<int64_t>(i) * 37) % 23 - 11) / 7;
  return fromVector(v, shape);
}

TEST(SimulatedDevice, FactoriesRunThereAndReadsWaitForTheirStream) {
  const Device dev = simulatedDevice();
  const auto before = simulatedCounters();
  Tensor z = zeros({3, 4}, DType::f32, dev), f = full({5}, 2.5, DType::f64, dev);
  Tensor a = arange(0, 6, 1, DType::i64, dev), v = fromVector({1, 2, 3}, dev);
  EXPECT_EQ(z.device(), dev);
  const auto queued = simulatedCounters();
  EXPECT_GT(queued.pending, 0) << "nothing ran yet: the device defers its work";
  EXPECT_GE(queued.launches - before.launches, 2) << "zeros and full are fill kernels";
  EXPECT_EQ(z.toVector(), std::vector<float>(12, 0.0f));
  EXPECT_EQ(f.toVector<double>(), std::vector<double>(5, 2.5));
  EXPECT_EQ(a.toVector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(v.toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(full({}, 7.0, DType::i32, dev).item<int32_t>(), 7);
  EXPECT_GT(simulatedCounters().deviceToHost, before.deviceToHost);
  EXPECT_EQ(simulatedCounters().pending, 0);
}

TEST(SimulatedDevice, EagerOpsComputeTheCpusBits) {
  const Device dev = simulatedDevice();
  const Tensor x = values({6, 8}), b = values({8}, 0.5f), w = values({5, 8}, 0.25f);
  const Tensor idx = fromVector(std::vector<int64_t>{4, 0, 5, 4}, Shape{4});
  auto run = [&](const Tensor& x, const Tensor& b, const Tensor& w, const Tensor& idx) {
    std::vector<Tensor> out;
    out.push_back(kiln::sigmoid(kiln::relu(x * 2.0 + b) - 0.5));
    out.push_back(kiln::exp(x.t()) + x.t());  // a transposed view read through its strides
    out.push_back(sum(x, {1}));
    out.push_back(amax(x, {0}, true));
    out.push_back(softmax(x, -1));
    out.push_back(layerNorm(x, {8}, b, b));
    out.push_back(matmul(x, w.t()));
    out.push_back(cat({x.narrow(1, 2, 3), x.slice(1, 0, 8, 4)}, 1));
    out.push_back(indexSelect(x, 0, idx));
    out.push_back((x > 0.25).to(DType::i32) * 3);
    return out;
  };
  const std::vector<Tensor> cpu = run(x, b, w, idx), there = run(x.to(dev), b.to(dev), w.to(dev), idx.to(dev));
  ASSERT_EQ(cpu.size(), there.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(there[i].device(), dev) << i;
    EXPECT_TRUE(sameBits(cpu[i], there[i])) << "result " << i;
  }
}

TEST(SimulatedDevice, CopyIntoViewsAndClones) {
  const Device dev = simulatedDevice();
  Tensor cpu = zeros({4, 6}), there = zeros({4, 6}, DType::f32, dev);
  const Tensor src = values({3, 4});
  cpu.t().narrow(0, 1, 4).narrow(1, 0, 3).copy_(src.t());
  there.t().narrow(0, 1, 4).narrow(1, 0, 3).copy_(src.t().to(dev));
  EXPECT_TRUE(sameBits(cpu, there));
  there.slice(1, 0, 6, 2).fill_(-1.0);
  cpu.slice(1, 0, 6, 2).fill_(-1.0);
  EXPECT_TRUE(sameBits(cpu, there));
  const Tensor c = there.t().clone();
  EXPECT_TRUE(c.isContiguous());
  EXPECT_TRUE(sameBits(c, cpu.t()));
}

TEST(SimulatedDevice, MovesBetweenDevicesCarryGradientsBack) {
  const Device dev = simulatedDevice();
  Tensor x = values({2, 3});
  x.setRequiresGrad();
  Tensor y = sum(x.to(dev) * 3.0);
  EXPECT_EQ(y.device(), dev);
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), Device::cpu());
  EXPECT_EQ(x.grad().toVector(), std::vector<float>(6, 3.0f));
  EXPECT_TRUE(sameBits(x.to(dev).cpu(), x.detach()));
}

TEST(SimulatedDevice, GradcheckRunsThere) {
  const Device dev = simulatedDevice();
  const Tensor x = values({3, 4}).to(DType::f64).to(dev), w = values({4}, 0.5f).to(DType::f64).to(dev);
  x.setRequiresGrad();
  w.setRequiresGrad();
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) { return kiln::tanh(matmul(in[0], in[1].unsqueeze(1))) * sum(in[1]); }, {x, w});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(SimulatedDevice, AnOpOnTwoDevicesNamesBoth) {
  const Device dev = simulatedDevice();
  EXPECT_EQ(errorOf([&] {
              (void)(ones({2, 3}, DType::f32, dev) + ones({3}));
            }),
            "add: expected all tensors on the same device, got f32[2,3]@cuda:0 and f32[3]@cpu");
}

/// Three SGD steps with momentum of a small MLP on `device`.
std::vector<Tensor> train(Device device) {
  manualSeed(3);
  nn::Sequential model(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 4));
  model->to(device);
  optim::SGD sgd(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  const Tensor x = values({5, 8}).to(device);
  const Tensor target = fromVector(std::vector<int64_t>{0, 3, 1, 2, 3}, Shape{5}).to(device);
  for (int step = 0; step < 3; ++step) {
    sgd.zeroGrad();
    crossEntropy(model->forward(x), target).backward();
    sgd.step();
  }
  return model->parameters();
}

TEST(SimulatedDevice, AModuleMovedThereTrainsAsOnTheCpu) {
  const Device dev = simulatedDevice();
  const std::vector<Tensor> cpu = train(Device::cpu()), there = train(dev);
  ASSERT_EQ(cpu.size(), there.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(there[i].device(), dev);
    EXPECT_TRUE(sameBits(cpu[i], there[i])) << "parameter " << i;
  }
}

TEST(SimulatedDevice, CompiledEqualsEagerThere) {
  const Device dev = simulatedDevice();
  auto f = [](const Tensor& x, const Tensor& b) { return layerNorm(kiln::relu(x + b) * 2.0, {8}) + sum(x, {0}); };
  auto compiled = compile(f);
  const Tensor x = values({6, 8}).to(dev), b = values({8}, 0.5f).to(dev);
  const Tensor eager = f(x, b), fused = compiled(x, b);
  EXPECT_EQ(fused.device(), dev);
  EXPECT_TRUE(sameBits(eager, fused));
  EXPECT_TRUE(sameBits(eager, f(x.cpu(), b.cpu())));
}

TEST(SimulatedDevice, WorkOnAnotherStreamIsSeenOnlyAfterAnEventWait) {
  const Device dev = simulatedDevice();
  // A size no other test uses: y's memory is fresh, so it holds the
  // device's poison (NaN) until the multiply runs.
  const Tensor x = values({97}).to(dev);
  synchronize(dev);
  const Stream side = Stream::create(dev);
  Tensor y;
  {
    StreamGuard guard(side);
    EXPECT_EQ(currentStream(dev), side);
    y = x * 2.0;
  }
  EXPECT_TRUE(currentStream(dev).isDefault());
  EXPECT_FALSE(side.query()) << "the side stream holds the multiply, not yet run";
  // Read on the default stream, which has not waited for the side stream:
  // the result's memory is still fresh memory (the device's poison, NaN).
  EXPECT_TRUE(std::isnan(y.toVector()[0])) << "a read without a wait sees stale memory";
  Event done;
  done.record(side);
  Stream::defaultStream(dev).wait(done);
  EXPECT_EQ(y.toVector(), (x.cpu() * 2.0).toVector()) << "after the wait the read sees the multiply";
  EXPECT_TRUE(done.query());
}

}  // namespace
}  // namespace kiln
