// Every kind of op on every test device against the CPU running the same
// op on the same values: bit for bit where the formula is exact on both
// (elementwise chains — kiln's own formulas, contraction off —, integer
// ops, comparisons, movement, dropout's mask) and within a tolerance where
// the device adds in another order (reductions, matmul; docs/ops.md).
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "device/device_list.h"
#include "runtime/device_interface.h"

namespace kiln::testing {
namespace {

class DeviceOps : public DeviceTest {};

TEST_P(DeviceOps, FactoriesMakeTheirTensorsThere) {
  const Device dev = device();
  Tensor z = zeros({3, 4}, DType::f32, dev), f = full({5}, 2.5, DType::f64, dev);
  Tensor a = arange(0, 6, 1, DType::i64, dev), v = fromVector({1, 2, 3}, dev);
  EXPECT_EQ(z.device(), dev);
  EXPECT_EQ(a.device(), dev);
  EXPECT_EQ(z.toVector(), std::vector<float>(12, 0.0f));
  EXPECT_EQ(f.toVector<double>(), std::vector<double>(5, 2.5));
  EXPECT_EQ(a.toVector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(v.toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(full({}, 7.0, DType::i32, dev).item<int32_t>(), 7);
  EXPECT_EQ(full({3}, -1.5, DType::bf16, dev).to(DType::f32).toVector(), std::vector<float>(3, -1.5f));
}

// f32 runs eagerly (one kernel per op); f16, bf16 and f64 through
// kiln::compile (one fused kernel per expression), which computes eager's
// bits (Note [Eager equals compiled]) with a fraction of the kernels PoCL
// must build in CI (each 0.1-1 s cold).
TEST_P(DeviceOps, ElementwiseOpsOfEveryFloatDTypeComputeTheCpusBits) {
  const Device dev = device();
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const Tensor x = values({5, 7}).to(dtype), y = values({7}, 0.7f).to(dtype);
    auto eager = [](const Tensor& x, const Tensor& y) {
      std::vector<Tensor> out;
      out.push_back(x + y * 2.0 - 0.5);
      out.push_back(x / (abs(y) + 1.0));
      out.push_back(kiln::exp(x) + kiln::log(abs(x) + 0.5) * sqrt(abs(y)));
      out.push_back(tanh(x) * sigmoid(y) + erf(x));
      out.push_back(gelu(x) + silu(y) + softplus(x));
      out.push_back(sin(x) + cos(y) + rsqrt(abs(x) + 1.0));
      out.push_back(pow(abs(x) + 0.1, y) + maximum(x, y) - minimum(x, y));
      out.push_back(clamp(x, -0.5, 0.75) + relu(neg(y)));
      out.push_back(where(x > y, x, y * 3.0));
      return out;
    };
    auto compiled = compile(eager);
    auto run = [&](const Tensor& a, const Tensor& b) { return dtype == DType::f32 ? eager(a, b) : compiled(a, b); };
    const std::vector<Tensor> cpu = run(x, y), there = run(x.to(dev), y.to(dev));
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(there[i].device(), dev);
      EXPECT_TRUE(sameBits(cpu[i], there[i])) << dtypeName(dtype) << " result " << i;
    }
  }
}

TEST_P(DeviceOps, IntegerBoolAndComparisonOpsComputeTheCpusBits) {
  const Device dev = device();
  const Tensor a = fromVector(std::vector<int64_t>{-7, 3, 2147483647, 0, 9, -1}, Shape{6});
  const Tensor b = fromVector(std::vector<int64_t>{2, -3, 1, 5, 9, 4}, Shape{6});
  auto run = [](const Tensor& a, const Tensor& b) {
    std::vector<Tensor> out;
    out.push_back(a * b + a - b);  // wraps as two's complement
    out.push_back(a.to(DType::i32) * 3 + b.to(DType::i32));
    out.push_back(maximum(a, b) - minimum(a, b));
    out.push_back(where(a == b, a, b * 2) + (a < b).to(DType::i64));
    out.push_back((a >= b).to(DType::f32) + (a != b).to(DType::f32));
    out.push_back(where(a > 0, a, b));
    out.push_back(a.to(DType::f16).to(DType::i64));  // casts saturate and round as on the CPU
    return out;
  };
  const std::vector<Tensor> cpu = run(a, b), there = run(a.to(dev), b.to(dev));
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(sameBits(cpu[i], there[i])) << "result " << i;
}

TEST_P(DeviceOps, MovementOpsAndViewsComputeTheCpusBits) {
  const Device dev = device();
  const Tensor x = values({4, 6});
  auto run = [](const Tensor& x) {
    std::vector<Tensor> out;
    out.push_back(x.t() + 1.0);
    out.push_back(x.narrow(1, 2, 3) * 2.0);
    out.push_back(x.slice(1, 0, 6, 2).contiguous());
    out.push_back(x.reshape({3, 8}).permute({1, 0}).contiguous());
    out.push_back(x.unsqueeze(0).expand({2, 4, 6}) * 1.0);
    out.push_back(cat({x.narrow(1, 2, 3), x.slice(1, 0, 6, 3), x.t().narrow(0, 0, 2).t()}, 1));
    out.push_back(x.t().clone());
    return out;
  };
  const std::vector<Tensor> cpu = run(x), there = run(x.to(dev));
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(sameBits(cpu[i], there[i])) << "result " << i;
  // copy_ into a strided view and fill_ a strided view.
  Tensor c = zeros({4, 6}), d = zeros({4, 6}, DType::f32, dev);
  c.t().narrow(0, 1, 4).narrow(1, 0, 3).copy_(values({3, 4}).t());
  d.t().narrow(0, 1, 4).narrow(1, 0, 3).copy_(values({3, 4}).t().to(dev));
  c.slice(1, 0, 6, 2).fill_(-1.0);
  d.slice(1, 0, 6, 2).fill_(-1.0);
  EXPECT_TRUE(sameBits(c, d));
}

TEST_P(DeviceOps, ReductionsEqualTheCpuWithinTheSumOrder) {
  const Device dev = device();
  const Tensor x = values({6, 40}), w = values({40}, 0.5f);
  auto run = [&](const Tensor& x, const Tensor& w) {
    std::vector<Tensor> out;
    out.push_back(sum(x, {1}));
    out.push_back(sum(x, {0}));  // a column reduction
    out.push_back(mean(x));
    out.push_back(var(x, {1}));
    out.push_back(softmax(x, -1));
    out.push_back(logSoftmax(x, -1));
    out.push_back(layerNorm(x, {40}, w, w));
    return out;
  };
  const std::vector<Tensor> cpu = run(x, w), there = run(x.to(dev), w.to(dev));
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(allClose(there[i], cpu[i], 1e-5, 1e-6)) << "result " << i;
  // Order-free reductions are exact.
  auto exact = [](const Tensor& x) {
    return std::vector<Tensor>{amax(x, {1}), amin(x, {0}, true), argmax(x, 1), sum(x.to(DType::i64) * 7, {1})};
  };
  const std::vector<Tensor> a = exact(x), b = exact(x.to(dev));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(sameBits(a[i], b[i])) << "exact result " << i;
}

TEST_P(DeviceOps, DropoutDrawsTheCpusMaskForTheSameGeneratorState) {
  const Device dev = device();
  const Tensor x = values({9, 33});
  manualSeed(1234);
  const Tensor cpu = dropout(x, 0.3);
  const Tensor cpuRand = rand({5, 7});
  manualSeed(1234);
  const Tensor there = dropout(x.to(dev), 0.3);
  const Tensor thereRand = rand({5, 7}, defaultGenerator(), dev);
  EXPECT_TRUE(sameBits(cpu, there));
  EXPECT_TRUE(sameBits(cpuRand, thereRand));
}

TEST_P(DeviceOps, MatmulAndGathersEqualTheCpu) {
  const Device dev = device();
  const Tensor x = values({6, 8}), w = values({5, 8}, 0.25f), batch = values({3, 6, 8});
  const Tensor idx = fromVector(std::vector<int64_t>{4, 0, 5, 4}, Shape{4});
  EXPECT_TRUE(allClose(matmul(x.to(dev), w.t().to(dev)), matmul(x, w.t()), 1e-5, 1e-6));
  EXPECT_TRUE(allClose(matmul(batch.to(dev), w.t().to(dev)), matmul(batch, w.t()), 1e-5, 1e-6));
  EXPECT_TRUE(sameBits(indexSelect(x.to(dev), 0, idx.to(dev)), indexSelect(x, 0, idx)));
  const Tensor src = values({4, 8}, 0.5f);
  EXPECT_TRUE(sameBits(indexAdd(x.to(dev), 0, idx.to(dev), src.to(dev)), indexAdd(x, 0, idx, src)));
  const std::string error = errorOf([&] { (void)indexSelect(x.to(dev), 0, fromVector(std::vector<int64_t>{7}, Shape{1}).to(dev)).cpu(); });
  EXPECT_EQ(error, "index_select: index 7 is out of range for dimension 0 of size 6");
}

TEST_P(DeviceOps, AnOpOnTwoDevicesNamesBoth) {
  const Device dev = device();
  if (dev.isCpu()) GTEST_SKIP() << "needs a second device";
  EXPECT_EQ(errorOf([&] { (void)(ones({2, 3}, DType::f32, dev) + ones({3}, DType::f32, Device::cpu())); }),
            "add: expected all tensors on the same device, got f32[2,3]@" + dev.str() + " and f32[3]@cpu");
  EXPECT_EQ(errorOf([&] { (void)matmul(ones({2, 3}, DType::f32, Device::cpu()), ones({3, 2}, DType::f32, dev)); }),
            "matmul: expected all tensors on the same device, got f32[2,3]@cpu and f32[3,2]@" + dev.str());
}

TEST_P(DeviceOps, F64FailsClearlyWhereTheDeviceHasNone) {
  const Device dev = device();
  if (runtime::deviceInterface(dev).properties().fp64) {
    EXPECT_EQ((ones({3}, DType::f64, dev) * 2.0).toVector<double>(), std::vector<double>(3, 2.0));
    return;
  }
  const std::string error = errorOf([&] { (void)(ones({3}, DType::f64, dev) * 2.0); });
  EXPECT_NE(error.find("f64"), std::string::npos) << error;
  EXPECT_NE(error.find(dev.str()), std::string::npos) << error;
}

KILN_INSTANTIATE_DEVICE_TESTS(DeviceOps);

}  // namespace
}  // namespace kiln::testing
