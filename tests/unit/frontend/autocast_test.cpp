// kiln::autocast (frontend/amp/autocast.h): the dtype each listed op gives
// inside a scope (products low, ranges and accumulations f32, others as
// promoted), nesting and disabling, per-device-type state, the weight cache
// (one cast of a parameter per scope, a new one after it changes), gradients
// through the casts to f32 parameters, backward without autocast, and
// GradScaler around an autocast step with an injected inf.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

constexpr DeviceType kCpu = DeviceType::cpu;

struct Inputs {
  Tensor x = randn({4, 8}, DType::f32);
  Tensor w = randn({8, 8}, DType::f32).setRequiresGrad();
  Tensor b = randn({8}, DType::f32).setRequiresGrad();
  Tensor labels = fromVector(std::vector<int64_t>{0, 3, 7, 1}, Shape{4});
};

TEST(Autocast, ListedOpsTakeTheirDTypeInsideAScope) {
  manualSeed(1);
  const Inputs in;
  for (DType low : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtypeName(low)));
    const Tensor xl = in.x.to(low);
    auto ac = autocast(kCpu, low);
    // The lower-precision list.
    EXPECT_EQ(matmul(in.x, in.w).dtype(), low);
    EXPECT_EQ(linear(in.x, in.w, in.b).dtype(), low);
    // The f32 list, given low-precision inputs.
    EXPECT_EQ(softmax(xl, 1).dtype(), DType::f32);
    EXPECT_EQ(logSoftmax(xl, 1).dtype(), DType::f32);
    EXPECT_EQ(layerNorm(xl, {8}, in.b.to(low), in.b.to(low)).dtype(), DType::f32);
    EXPECT_EQ(crossEntropy(xl, in.labels).dtype(), DType::f32);
    EXPECT_EQ(mseLoss(xl, xl).dtype(), DType::f32);
    EXPECT_EQ(sum(xl).dtype(), DType::f32);
    EXPECT_EQ(mean(xl).dtype(), DType::f32);
    EXPECT_EQ(exp(xl).dtype(), DType::f32);
    EXPECT_EQ(log(xl).dtype(), DType::f32);
    EXPECT_EQ(pow(xl, 2.0).dtype(), DType::f32);
    // Unlisted ops: as given, promoted as PyTorch promotes.
    EXPECT_EQ(relu(xl).dtype(), low);
    EXPECT_EQ((xl + in.x).dtype(), DType::f32);
    EXPECT_EQ((xl * 2.0).dtype(), low);
    // Not eligible: f64 and integers stay.
    EXPECT_EQ(matmul(in.x.to(DType::f64), in.w.to(DType::f64)).dtype(), DType::f64);
    EXPECT_EQ(sum(in.labels).dtype(), DType::i64);
  }
  EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::f32) << "the scope is closed";
  EXPECT_EQ(exp(in.x.to(DType::bf16)).dtype(), DType::bf16) << "the scope is closed";
}

TEST(Autocast, ScopesNestAndAnInnerOneCanTurnItOff) {
  manualSeed(2);
  const Inputs in;
  EXPECT_FALSE(isAutocastEnabled(kCpu));
  {
    auto outer = autocast(kCpu, DType::bf16);
    EXPECT_EQ(autocastDType(kCpu), DType::bf16);
    {
      auto off = autocast(kCpu, DType::bf16, /*enabled=*/false);
      EXPECT_FALSE(isAutocastEnabled(kCpu));
      EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::f32);
      {
        auto inner = autocast(kCpu, DType::f16);
        EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::f16);
      }
      EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::f32);
    }
    EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::bf16);
  }
  EXPECT_FALSE(isAutocastEnabled(kCpu));
  EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::f32);
}

TEST(Autocast, OnlyItsDeviceTypeIsAffected) {
  manualSeed(3);
  const Inputs in;
  {
    // An opencl scope leaves cpu tensors alone (no device needed for that).
    auto ac = autocast(DeviceType::opencl, DType::bf16);
    EXPECT_TRUE(isAutocastEnabled(DeviceType::opencl));
    EXPECT_FALSE(isAutocastEnabled(kCpu));
    EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::f32);
  }
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  const Tensor x = in.x.to(device), w = in.w.detach().to(device);
  auto ac = autocast(kCpu, DType::bf16);
  EXPECT_EQ(matmul(x, w).dtype(), DType::f32) << "a cpu scope cast an opencl tensor";
  EXPECT_EQ(matmul(in.x, in.w).dtype(), DType::bf16);
}

TEST(Autocast, ADTypeOtherThanF16OrBf16IsAnError) {
  EXPECT_EQ(errorOf([] { auto ac = autocast(kCpu, DType::f32); }),
            "autocast: expected dtype f16 or bf16 for device type cpu, got f32");
  EXPECT_FALSE(isAutocastEnabled(kCpu)) << "a failed scope left state behind";
}

TEST(Autocast, AParameterIsCastOncePerScope) {
  manualSeed(4);
  const Inputs in;
  const detail::AutocastCacheStats before = detail::autocastCacheStats();
  {
    auto ac = autocast(kCpu, DType::bf16);
    const int64_t launches = runtime::kernelLaunchCount();
    const Tensor y1 = matmul(in.x, in.w);
    const int64_t first = runtime::kernelLaunchCount() - launches;
    const Tensor y2 = matmul(in.x, in.w);
    const int64_t second = runtime::kernelLaunchCount() - launches - first;
    (void)linear(in.x, in.w);
    // The first product casts x and w and multiplies; the second casts only x.
    EXPECT_EQ(second, first - 1);
    EXPECT_EQ(y1.to(DType::f32).toVector(), y2.to(DType::f32).toVector());
    const detail::AutocastCacheStats now = detail::autocastCacheStats();
    EXPECT_EQ(now.casts - before.casts, 1);
    EXPECT_EQ(now.hits - before.hits, 2);
    // Not a leaf that requires grad: never cached.
    const Tensor h = in.x * 2.0;
    (void)matmul(h, in.w);
    (void)matmul(h, in.w);
    EXPECT_EQ(detail::autocastCacheStats().casts - before.casts, 1);
    // A weight changed in place (an optimizer step) is cast again.
    {
      NoGradGuard noGrad;
      in.w.mul_(fromVector(std::vector<float>{2.0f}, {1}));
    }
    const Tensor y4 = matmul(in.x, in.w);
    EXPECT_EQ(detail::autocastCacheStats().casts - before.casts, 2);
    const std::vector<float> a = y1.to(DType::f32).toVector(), b = y4.to(DType::f32).toVector();
    EXPECT_NE(a, b) << "the stale copy was used";
  }
  // A new scope starts with an empty cache.
  auto ac = autocast(kCpu, DType::bf16);
  (void)matmul(in.x, in.w);
  EXPECT_EQ(detail::autocastCacheStats().casts - before.casts, 3);
}

TEST(Autocast, GradientsFlowThroughTheCastsToF32Parameters) {
  manualSeed(5);
  const Inputs in;
  Tensor loss;
  {
    auto ac = autocast(kCpu, DType::bf16);
    loss = crossEntropy(linear(in.x, in.w, in.b), in.labels);
  }
  EXPECT_EQ(loss.dtype(), DType::f32);
  loss.backward();
  ASSERT_TRUE(in.w.grad().defined());
  EXPECT_EQ(in.w.grad().dtype(), DType::f32);
  EXPECT_EQ(in.b.grad().dtype(), DType::f32);
  // Against the same step in f32: within bf16's rounding of the operands.
  const Tensor w32 = in.w.detach().setRequiresGrad(), b32 = in.b.detach().setRequiresGrad();
  crossEntropy(linear(in.x, w32, b32), in.labels).backward();
  const std::vector<float> got = in.w.grad().toVector(), want = w32.grad().toVector();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.02 + 0.02 * std::abs(want[i])) << i;
}

TEST(Autocast, BackwardInsideTheScopeRunsWithoutIt) {
  // An f32 graph whose backward is f32 matmuls: run inside a bf16 scope,
  // autocast would make them bf16 products and change the gradient.
  manualSeed(6);
  const Inputs in;
  const Tensor w2 = in.w.detach().setRequiresGrad();
  sum(matmul(in.x, in.w) * matmul(in.x, in.w)).backward();
  const Tensor loss = sum(matmul(in.x, w2) * matmul(in.x, w2));
  {
    auto ac = autocast(kCpu, DType::bf16);
    loss.backward();
    EXPECT_TRUE(isAutocastEnabled(kCpu)) << "backward left autocast off";
  }
  EXPECT_EQ(w2.grad().dtype(), DType::f32);
  EXPECT_EQ(in.w.grad().toVector(), w2.grad().toVector());
}

TEST(Autocast, ACheckpointRecomputesUnderTheForwardsAutocastState) {
  // backward() runs with autocast off; kiln::checkpoint's recomputation
  // runs under the state its forward ran in, so it computes the same bf16
  // products (else it would return f32 and fail its own check).
  manualSeed(8);
  const Inputs in;
  const Tensor w2 = in.w.detach().setRequiresGrad(), b2 = in.b.detach().setRequiresGrad();
  Tensor plain, checkpointed;
  {
    auto ac = autocast(kCpu, DType::bf16);
    plain = crossEntropy(relu(linear(in.x, in.w, in.b)), in.labels);
    const std::vector<Tensor> h = checkpoint(
        [&](const std::vector<Tensor>& xs) { return std::vector<Tensor>{relu(linear(xs[0], w2, b2))}; }, {in.x});
    EXPECT_EQ(h[0].dtype(), DType::bf16);
    checkpointed = crossEntropy(h[0], in.labels);
  }
  plain.backward();
  checkpointed.backward();
  EXPECT_EQ(in.w.grad().toVector(), w2.grad().toVector());
  EXPECT_EQ(in.b.grad().toVector(), b2.grad().toVector());
}

TEST(Autocast, GradScalerSkipsAnAutocastStepWithAnInjectedInf) {
  manualSeed(7);
  const Inputs in;
  optim::SGD sgd({in.w, in.b}, {.lr = 0.1});
  amp::GradScaler scaler({.initScale = 1024.0});
  const std::vector<float> w0 = in.w.toVector();
  auto step = [&](const Tensor& x) {
    sgd.zeroGrad();
    Tensor loss;
    {
      auto ac = autocast(kCpu, DType::bf16);
      loss = crossEntropy(linear(x, in.w, in.b), in.labels);
    }
    scaler.scale(loss).backward();
    const bool taken = scaler.step(sgd);
    scaler.update();
    return taken;
  };
  std::vector<float> bad = in.x.toVector();
  bad[5] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(step(fromVector(bad, {4, 8})));
  EXPECT_EQ(in.w.toVector(), w0) << "the step with an inf was taken";
  EXPECT_EQ(scaler.getScale(), 512.0);
  EXPECT_TRUE(step(in.x));
  EXPECT_NE(in.w.toVector(), w0) << "the clean step was skipped";
  EXPECT_EQ(scaler.getScale(), 512.0);
}

}  // namespace
}  // namespace kiln
