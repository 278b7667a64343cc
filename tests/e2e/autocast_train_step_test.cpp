// Mixed-precision training steps (frontend/amp/autocast.h): a step whose
// forward runs under bf16 autocast, compiled whole by kiln::compile, leaves
// the loss, parameters, gradients and optimizer state equal, bit for bit, to
// the same steps run eagerly (Note [Eager equals compiled]); its casts fuse
// into the kernels next to them, so the compiled step takes no kernel of
// its own for a cast of an activation, only one per weight copied to bf16.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/same_bits.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace kiln {
namespace {

nn::Sequential makeModel(uint64_t seed) {
  manualSeed(seed);
  return nn::Sequential(nn::Linear(12, 24), nn::ReLU(), nn::LayerNorm(std::vector<int64_t>{24}), nn::Linear(24, 24),
                        nn::ReLU(), nn::Linear(24, 5));
}

struct Batch {
  Tensor x, y;
};

Batch batch(int i) {
  Generator g(200 + i);
  Tensor x = randn({16, 12}, g);
  std::vector<int64_t> labels;
  for (int k = 0; k < 16; ++k) labels.push_back((k * 3 + i) % 5);
  return {x, fromVector(labels, Shape{16})};
}

/// One step; the forward and the loss under autocast when `low` is given.
Tensor trainStep(nn::Sequential& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y,
                 std::optional<DType> low) {
  opt.zeroGrad();
  Tensor loss;
  {
    auto ac = autocast(DeviceType::cpu, low.value_or(DType::bf16), low.has_value());
    loss = crossEntropy(model->forward(x), y);
  }
  loss.backward();
  opt.step();
  return loss;
}

TEST(AutocastTrainStep, CompiledBf16StepsEqualEagerSteps) {
  nn::Sequential eager = makeModel(1), compiled = makeModel(1);
  optim::AdamW eagerOpt(eager->parameters(), {.lr = 1e-2}), compiledOpt(compiled->parameters(), {.lr = 1e-2});
  auto step =
      compile([&](const Tensor& x, const Tensor& y) { return trainStep(compiled, compiledOpt, x, y, DType::bf16); });
  for (int i = 0; i < 5; ++i) {
    const Batch b = batch(i);
    const Tensor eagerLoss = trainStep(eager, eagerOpt, b.x, b.y, DType::bf16);
    const Tensor compiledLoss = step(b.x, b.y);
    EXPECT_EQ(eagerLoss.dtype(), DType::f32);
    EXPECT_TRUE(sameBits(eagerLoss, compiledLoss, "loss at step " + std::to_string(i)));
    const auto pe = eager->namedParameters(), pc = compiled->namedParameters();
    for (const std::string& name : pe.keys()) {
      EXPECT_EQ(pe[name].dtype(), DType::f32) << name;
      EXPECT_TRUE(sameBits(pe[name], pc[name], "step " + std::to_string(i) + " " + name));
      EXPECT_TRUE(sameBits(pe[name].grad(), pc[name].grad(), "step " + std::to_string(i) + " grad of " + name));
    }
  }
  EXPECT_EQ(step.numCompiles(), 1);
  for (size_t i = 0; i < eager->parameters().size(); ++i) {
    const optim::AdamParamState* se = eagerOpt.state(eager->parameters()[i]);
    const optim::AdamParamState* sc = compiledOpt.state(compiled->parameters()[i]);
    ASSERT_TRUE(se && sc);
    EXPECT_TRUE(sameBits(se->expAvg, sc->expAvg, "exp_avg"));
    EXPECT_TRUE(sameBits(se->expAvgSq, sc->expAvgSq, "exp_avg_sq"));
  }
}

TEST(AutocastTrainStep, ACompiledStepIsGuardedOnTheAutocastState) {
  nn::Sequential model = makeModel(2);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  auto forward = compile([&](const Tensor& x) { return model->forward(x); });
  const Batch b = batch(0);
  EXPECT_EQ(forward(b.x).dtype(), DType::f32);
  {
    auto ac = autocast(DeviceType::cpu, DType::bf16);
    EXPECT_EQ(forward(b.x).dtype(), DType::bf16);
  }
  EXPECT_EQ(forward(b.x).dtype(), DType::f32);
  EXPECT_EQ(forward.numCompiles(), 2);
}

TEST(AutocastTrainStep, TheCastsFuseWithTheirNeighbours) {
  // The same compiled step in f32 and under bf16 autocast. The bf16 step
  // has the casts of the hidden activations (to bf16 after each layer, to
  // f32 for layer_norm and the loss) and of each gradient back: all fuse
  // into the kernels that produce or read them, and the bias-relu kernels
  // stay their matmuls' epilogues (Note [Parameter casts come first]). It
  // adds four kernels: the casts of x and of the three weight matrices,
  // graph inputs read only by matmuls; and one weight gradient's bf16
  // matmul takes that gradient's cast and AdamW update as its epilogue,
  // which the f32 step's does not: one kernel less.
  auto kernelsOf = [](std::optional<DType> low) {
    nn::Sequential model = makeModel(3);
    optim::AdamW opt(model->parameters(), {.lr = 1e-3});
    auto step = compile([&](const Tensor& x, const Tensor& y) { return trainStep(model, opt, x, y, low); });
    const Batch b = batch(0);
    step(b.x, b.y);
    step(b.x, b.y);
    return std::pair{step.lastNumKernels(), step.lastGraph()};
  };
  const auto [f32Kernels, f32Graph] = kernelsOf(std::nullopt);
  const auto [bf16Kernels, bf16Graph] = kernelsOf(DType::bf16);
  EXPECT_EQ(bf16Kernels, f32Kernels + 3) << "f32:\n" << f32Graph << "\nbf16:\n" << bf16Graph;
}

}  // namespace
}  // namespace kiln
