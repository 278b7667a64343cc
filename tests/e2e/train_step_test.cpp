// Compiled training steps: kiln::compile of a function that runs forward,
// backward() and optimizer.step() (frontend/trace.h, Note [Writes into eager
// state]) must leave parameters, optimizer state and gradients equal, bit
// for bit, to the same steps run eagerly.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/same_bits.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace kiln {
namespace {

/// The MLP of examples/train_digits.cpp, small; made from `seed`, with a
/// dropout drawing from its own generator seeded with `dropoutSeed`.
nn::Sequential makeModel(uint64_t seed, uint64_t dropoutSeed = 7) {
  manualSeed(seed);
  return nn::Sequential(nn::Linear(12, 24), nn::ReLU(), nn::Dropout(0.25, Generator(dropoutSeed)),
                        nn::LayerNorm(std::vector<int64_t>{24}), nn::Linear(24, 5));
}

struct Batch {
  Tensor x, y;
};

Batch batch(int i) {
  Generator g(100 + i);
  Tensor x = randn({16, 12}, g);
  std::vector<int64_t> labels;
  for (int k = 0; k < 16; ++k) labels.push_back((k * 7 + i) % 5);
  return {x, fromVector(labels, Shape{16})};
}

void expectSameParameters(nn::Sequential& a, nn::Sequential& b, const std::string& when) {
  const auto pa = a->namedParameters(), pb = b->namedParameters();
  ASSERT_EQ(pa.keys(), pb.keys());
  for (const std::string& name : pa.keys()) {
    EXPECT_TRUE(sameBits(pa[name], pb[name], when + " " + name));
    EXPECT_TRUE(sameBits(pa[name].grad(), pb[name].grad(), when + " grad of " + name));
  }
}

/// One training step: zeroGrad, forward, cross-entropy, backward, step.
Tensor trainStep(nn::Sequential& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  opt.zeroGrad();
  Tensor loss = crossEntropy(model->forward(x), y);
  loss.backward();
  opt.step();
  return loss;
}

/// trainStep of `model` and `opt`, compiled whole.
auto compiledTrainStep(nn::Sequential& model, optim::Optimizer& opt) {
  return compile([&model, &opt](const Tensor& x, const Tensor& y) { return trainStep(model, opt, x, y); });
}

TEST(TrainStep, CompiledAdamWStepsEqualEagerSteps) {
  nn::Sequential eager = makeModel(1), compiled = makeModel(1);
  optim::AdamW eagerOpt(eager->parameters(), {.lr = 1e-2}), compiledOpt(compiled->parameters(), {.lr = 1e-2});
  auto step = compiledTrainStep(compiled, compiledOpt);
  for (int i = 0; i < 6; ++i) {
    const Batch b = batch(i);
    Tensor eagerLoss = trainStep(eager, eagerOpt, b.x, b.y);
    Tensor compiledLoss = step(b.x, b.y);
    EXPECT_TRUE(sameBits(eagerLoss, compiledLoss, "loss at step " + std::to_string(i)));
    expectSameParameters(eager, compiled, "after step " + std::to_string(i));
  }
  // One program: the step count and bias corrections are per-call values,
  // the gradients are assigned before they are read (no guard on them).
  EXPECT_EQ(step.numCompiles(), 1);
  // The optimizer's state is the eager optimizer's.
  for (size_t i = 0; i < eager->parameters().size(); ++i) {
    const optim::AdamParamState* se = eagerOpt.state(eager->parameters()[i]);
    const optim::AdamParamState* sc = compiledOpt.state(compiled->parameters()[i]);
    ASSERT_TRUE(se && sc);
    EXPECT_EQ(se->step, 6);
    EXPECT_EQ(sc->step, 6);
    EXPECT_TRUE(sameBits(se->expAvg, sc->expAvg, "exp_avg"));
    EXPECT_TRUE(sameBits(se->expAvgSq, sc->expAvgSq, "exp_avg_sq"));
  }
}

TEST(TrainStep, TheWholeStepIsFewKernels) {
  nn::Sequential model = makeModel(2);
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  auto step = compiledTrainStep(model, opt);
  const Batch b = batch(0);
  step(b.x, b.y);
  // Eagerly the step dispatches about 10 kernels per parameter in the
  // optimizer alone; compiled, each parameter's update is one fused kernel
  // (with its moments), next to forward and backward.
  const int64_t before = runtime::kernelLaunchCount();
  step(b.x, b.y);
  const int64_t compiledKernels = runtime::kernelLaunchCount() - before;
  const int64_t eagerBefore = runtime::kernelLaunchCount();
  trainStep(model, opt, b.x, b.y);
  const int64_t eagerKernels = runtime::kernelLaunchCount() - eagerBefore;
  EXPECT_EQ(compiledKernels, step.lastNumKernels());
  EXPECT_LT(compiledKernels * 3, eagerKernels) << step.lastGraph();
}

TEST(TrainStep, WeightGradientsAreNotMaterializedTransposed) {
  // linear's weight enters matmul as weight.t(); its gradient is computed
  // as (gᵀ·x) in the weight's own layout (as PyTorch's mm_mat2_backward),
  // so no transposed value in the compiled step is read by anything but a
  // matmul (which takes transposed operands as they are).
  nn::Sequential model = makeModel(8);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  auto step = compiledTrainStep(model, opt);
  const Batch b = batch(0);
  step(b.x, b.y);
  std::istringstream lines(step.lastGraph());
  std::vector<std::string> all, transposed;
  for (std::string line; std::getline(lines, line);) {
    all.push_back(line);
    const size_t eq = line.find(" = transpose(");
    if (eq != std::string::npos) transposed.push_back(line.substr(line.find('%'), eq - line.find('%')));
  }
  EXPECT_EQ(transposed.size(), 4u) << step.lastGraph();  // two weights forward, two gradients' gᵀ
  for (const std::string& value : transposed) {
    for (const std::string& line : all) {
      if (line.find(value + ")") != std::string::npos || line.find(value + ",") != std::string::npos) {
        EXPECT_NE(line.find("matmul("), std::string::npos) << value << " is read by: " << line;
      }
    }
  }
}

TEST(TrainStep, ParametersAndMomentsAreUpdatedInTheirOwnStorage) {
  // Note [Donated buffers]: each weight's and moment's new value is computed
  // into its own buffer, in place, so the step allocates nothing for them.
  nn::Sequential eager = makeModel(9), compiled = makeModel(9);
  optim::AdamW eagerOpt(eager->parameters(), {.lr = 1e-2}), compiledOpt(compiled->parameters(), {.lr = 1e-2});
  auto step = compiledTrainStep(compiled, compiledOpt);
  auto storageOf = [](const Tensor& t) { return t.impl()->storage->hostData(); };
  std::vector<const void*> before;
  for (int i = 0; i < 4; ++i) {
    const Batch b = batch(i);
    trainStep(eager, eagerOpt, b.x, b.y);
    step(b.x, b.y);
    expectSameParameters(eager, compiled, "after step " + std::to_string(i));
    std::vector<const void*> now;
    for (const Tensor& p : compiled->parameters()) {
      if (p.dim() < 2) continue;  // the biases' updates are fused into their column sums (reductions)
      now.push_back(storageOf(p));
      now.push_back(storageOf(compiledOpt.state(p)->expAvg));
      now.push_back(storageOf(compiledOpt.state(p)->expAvgSq));
    }
    ASSERT_EQ(now.size(), 6u);
    if (i > 0) {
      EXPECT_EQ(now, before) << "at step " << i;  // the state exists from the first call
    }
    before = now;
  }
}

TEST(TrainStep, SgdMomentumRetracesOnceAfterItsFirstStep) {
  nn::Sequential eager = makeModel(3), compiled = makeModel(3);
  const optim::SGDOptions options{.lr = 0.05, .momentum = 0.9, .weightDecay = 1e-3, .nesterov = true};
  optim::SGD eagerOpt(eager->parameters(), options), compiledOpt(compiled->parameters(), options);
  auto step = compiledTrainStep(compiled, compiledOpt);
  for (int i = 0; i < 4; ++i) {
    const Batch b = batch(i);
    trainStep(eager, eagerOpt, b.x, b.y);
    step(b.x, b.y);
    expectSameParameters(eager, compiled, "after step " + std::to_string(i));
    for (const Tensor& p : compiled->parameters()) EXPECT_TRUE(compiledOpt.momentumBuffer(p).defined());
  }
  // The first step copies the gradient into a new momentum buffer, later
  // steps update it: a guard on the buffer's existence, one retrace.
  EXPECT_EQ(step.numCompiles(), 2);
}

TEST(TrainStep, ASchedulersLearningRateTakesEffectWithoutRecompiling) {
  nn::Sequential eager = makeModel(4), compiled = makeModel(4);
  optim::Adam eagerOpt(eager->parameters(), {.lr = 1e-2, .weightDecay = 1e-2});
  optim::Adam compiledOpt(compiled->parameters(), {.lr = 1e-2, .weightDecay = 1e-2});
  optim::StepLR eagerSched(eagerOpt, 1, 0.5), compiledSched(compiledOpt, 1, 0.5);
  auto step = compiledTrainStep(compiled, compiledOpt);
  for (int i = 0; i < 4; ++i) {
    const Batch b = batch(i);
    trainStep(eager, eagerOpt, b.x, b.y);
    eagerSched.step();
    step(b.x, b.y);
    compiledSched.step();
    expectSameParameters(eager, compiled, "after step " + std::to_string(i));
  }
  EXPECT_EQ(step.numCompiles(), 1);
}

TEST(TrainStep, GradientsAccumulateAcrossCallsWithOneGuardedRetrace) {
  // No zeroGrad in the step: backward adds into the gradients the previous
  // call left, which the program reads (guarded on their existence).
  nn::Sequential eager = makeModel(5), compiled = makeModel(5);
  auto step = compile([&](const Tensor& x, const Tensor& y) {
    Tensor loss = crossEntropy(compiled->forward(x), y);
    loss.backward();
    return loss;
  });
  for (int i = 0; i < 3; ++i) {
    const Batch b = batch(i);
    crossEntropy(eager->forward(b.x), b.y).backward();
    step(b.x, b.y);
    expectSameParameters(eager, compiled, "after call " + std::to_string(i));
  }
  EXPECT_EQ(step.numCompiles(), 2);  // gradients undefined, then defined
  // Clearing them outside makes the first program valid again.
  compiled->zeroGrad();
  eager->zeroGrad();
  const Batch b = batch(9);
  crossEntropy(eager->forward(b.x), b.y).backward();
  step(b.x, b.y);
  expectSameParameters(eager, compiled, "after clearing");
  EXPECT_EQ(step.numCompiles(), 2);
}

TEST(TrainStep, ACompiledForwardAndBackwardFeedsAnEagerOptimizer) {
  nn::Sequential eager = makeModel(6), compiled = makeModel(6);
  optim::SGD eagerOpt(eager->parameters(), {.lr = 0.1}), compiledOpt(compiled->parameters(), {.lr = 0.1});
  auto grads = compile([&](const Tensor& x, const Tensor& y) {
    compiledOpt.zeroGrad();
    Tensor loss = crossEntropy(compiled->forward(x), y);
    loss.backward();
    return loss;
  });
  for (int i = 0; i < 3; ++i) {
    const Batch b = batch(i);
    trainStep(eager, eagerOpt, b.x, b.y);
    grads(b.x, b.y);
    for (const Tensor& p : compiled->parameters()) ASSERT_FALSE(p.grad().isTraced());
    compiledOpt.step();
    expectSameParameters(eager, compiled, "after step " + std::to_string(i));
  }
}

TEST(TrainStep, AnEagerTensorUpdatedInPlaceIsWrittenBackAtEveryCall) {
  Tensor total = zeros({3});
  const int64_t v0 = total.version();
  auto f = compile([&](const Tensor& x) {
    total.add_(x);
    return total * 2.0;  // reads the updated value
  });
  const Tensor x = fromVector(std::vector<float>{1, 2, 3}, Shape{3});
  Tensor r1 = f(x);
  Tensor r2 = f(x);
  EXPECT_EQ(total.toVector(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(r1.toVector(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(r2.toVector(), (std::vector<float>{4, 8, 12}));
  EXPECT_GT(total.version(), v0 + 1);  // bumped by every write-back
  EXPECT_EQ(f.numCompiles(), 1);
}

TEST(TrainStep, AnArgumentUpdatedInPlaceIsWrittenBackToTheCallersTensor) {
  auto f = compile([](const Tensor& acc, const Tensor& x) {
    acc.add_(x);
    return acc * 2.0;
  });
  const Tensor x = fromVector(std::vector<float>{1, 2, 3, 4}, Shape{4});
  Tensor acc = zeros({4});
  const void* storage = acc.impl()->storage->hostData();
  const uint64_t v0 = acc.version();
  EXPECT_EQ(f(acc, x).toVector(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(acc.toVector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(f(acc, x).toVector(), (std::vector<float>{4, 8, 12, 16}));
  EXPECT_EQ(acc.toVector(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(acc.impl()->storage->hostData(), storage);  // computed in place (donated)
  EXPECT_EQ(acc.version(), v0 + 2);
  // Another tensor of the same type: the same program, its own write-back.
  Tensor other = ones({4});
  f(other, x);
  EXPECT_EQ(other.toVector(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(acc.toVector(), (std::vector<float>{2, 4, 6, 8}));
  // A strided argument is copied on entry; the new values go back through its strides.
  Tensor big = zeros({4, 2});
  f(big.select(1, 1), x);
  EXPECT_EQ(big.toVector(), (std::vector<float>{0, 1, 0, 2, 0, 3, 0, 4}));
  EXPECT_EQ(f.numCompiles(), 1);
}

TEST(TrainStep, ACallWhoseArgumentAliasesAWrittenTensorRunsEagerly) {
  Tensor w = ones({3});
  auto f = compile([&](const Tensor& x) {
    w.mul_(2.0);
    return x + 1.0;
  });
  EXPECT_EQ(f(zeros({3})).toVector(), (std::vector<float>{1, 1, 1}));  // w = 2
  // x is w: eagerly x + 1 reads the doubled w. The program read x before
  // the write, so this call runs eagerly.
  testing::internal::CaptureStderr();
  const Tensor r = f(w);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.toVector(), (std::vector<float>{5, 5, 5}));
  EXPECT_EQ(w.toVector(), (std::vector<float>{4, 4, 4}));
  EXPECT_EQ(f.numEagerFallbacks(), 1);
  EXPECT_EQ(err,
            "kiln::compile: argument 0 (f32[3]@cpu) shares storage with captured tensor f32[3]@cpu, which the "
            "compiled function writes in place; this call and such calls run eagerly\n");
  EXPECT_EQ(f(zeros({3})).toVector(), (std::vector<float>{1, 1, 1}));  // compiled again, w = 8
  EXPECT_EQ(w.toVector(), (std::vector<float>{8, 8, 8}));
  EXPECT_EQ(f.numCompiles(), 1);
}

TEST(TrainStep, AModuleMadeAtTheFirstCallIsInitializedOnce) {
  // Note [Initialization is eager]: made while tracing, the layer's
  // parameters are initialized then, not by every call of the program.
  std::unique_ptr<nn::Linear> layer;
  auto f = compile([&](const Tensor& x) {
    if (!layer) layer = std::make_unique<nn::Linear>(4, 3);
    return (*layer)(x);
  });
  const Tensor x = ones({2, 4});
  f(x);
  ASSERT_TRUE(layer);
  EXPECT_FALSE((*layer)->weight.isTraced());
  {
    NoGradGuard noGrad;
    (*layer)->weight.fill_(0.5);
    (*layer)->bias.fill_(1.0);
  }
  EXPECT_EQ(f(x).toVector(), std::vector<float>(6, 3.0f));  // 4 * 0.5 + 1, not re-initialized
}

TEST(TrainStep, WritesOfEagerValuesHappenAtEveryCall) {
  // fill_ and copy_ from eager tensors inside a compiled function write at
  // every call, as eagerly, not once while tracing.
  Tensor counter = zeros({2});
  Tensor source = fromVector(std::vector<float>{7, 8}, Shape{2});
  auto f = compile([&](const Tensor& x) {
    counter.fill_(3.0);
    Tensor y = x * 2.0;
    y.zero_();  // a traced tensor set from an eager value
    Tensor z = x * 1.0;
    z.copy_(source);
    return y + z;
  });
  const Tensor x = ones({2});
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{7, 8}));
  EXPECT_EQ(counter.toVector(), (std::vector<float>{3, 3}));
  counter.fill_(0.0);
  source.fill_(1.0);
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{1, 1}));  // source read at the call
  EXPECT_EQ(counter.toVector(), (std::vector<float>{3, 3}));  // written again
  EXPECT_EQ(f.numCompiles(), 1);
}

TEST(TrainStep, ArgumentsThatRequireGradAreLeavesWhoseGradientsAreWrittenBack) {
  auto f = compile([](const Tensor& a, const Tensor& b) {
    Tensor loss = sum(a * a * b);
    loss.backward();
    return loss;
  });
  const Tensor w = fromVector(std::vector<float>{1, 2, 3}, Shape{3}).setRequiresGrad();
  const Tensor c = fromVector(std::vector<float>{2, 2, 2}, Shape{3});  // no gradient
  EXPECT_EQ(f(w, c).toVector(), (std::vector<float>{28}));
  EXPECT_EQ(w.grad().toVector(), (std::vector<float>{4, 8, 12}));  // d/da sum(a² b) = 2ab
  EXPECT_FALSE(c.grad().defined());
  // As eagerly, a second backward adds into the gradient the first left:
  // a program seeded with the caller's gradient (one retrace, guarded).
  f(w, c);
  EXPECT_EQ(w.grad().toVector(), (std::vector<float>{8, 16, 24}));
  EXPECT_EQ(f.numCompiles(), 2);
  // Another leaf, and a cleared gradient: the first program again.
  const Tensor v = fromVector(std::vector<float>{-1, 0, 1}, Shape{3}).setRequiresGrad();
  f(v, c);
  EXPECT_EQ(v.grad().toVector(), (std::vector<float>{-4, 0, 4}));
  w.setGrad({});
  f(w, c);
  EXPECT_EQ(w.grad().toVector(), (std::vector<float>{4, 8, 12}));
  EXPECT_EQ(f.numCompiles(), 2);
  // The same steps eagerly give the same gradients.
  const Tensor e = fromVector(std::vector<float>{1, 2, 3}, Shape{3}).setRequiresGrad();
  sum(e * e * c).backward();
  sum(e * e * c).backward();
  EXPECT_EQ(e.grad().toVector(), (std::vector<float>{8, 16, 24}));
}

TEST(TrainStep, AViewOfAnEagerTensorSeesTheWriteBack) {
  Tensor buffer = zeros({2, 3});
  Tensor row = buffer.select(0, 1);  // a view, read after the calls
  auto f = compile([&](const Tensor& x) {
    buffer.add_(x);
    return x;
  });
  f(ones({2, 3}));
  EXPECT_EQ(row.toVector(), (std::vector<float>{1, 1, 1}));  // written into the storage the view shares
}

TEST(TrainStep, AViewTakenInsideTheTraceReadsTheWrittenValue) {
  Tensor buffer = zeros({2, 3});
  auto f = compile([&](const Tensor& x) {
    buffer.add_(x);
    return buffer.select(0, 1) * 1.0;  // traced from the buffer's new value
  });
  const Tensor x = fromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{8, 10, 12}));
}

TEST(TrainStepErrors, WritingIntoAViewOfAnEagerTensorIsRefused) {
  Tensor buffer = zeros({2, 3});
  Tensor row = buffer.select(0, 0);  // an eager view, captured
  auto f = compile([&](const Tensor& x) {
    row.add_(x);
    return x;
  });
  try {
    f(ones({3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_: in-place writes into a view of an eager tensor are not supported "
                                         "while tracing (kiln::compile); f32[3]@cpu is a view"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(buffer.toVector(), std::vector<float>(6, 0.0f));  // nothing written
}

TEST(TrainStepErrors, ReadingAnotherViewOfWrittenStorageIsRefused) {
  Tensor buffer = zeros({2, 3});
  Tensor row = buffer.select(0, 0);  // an eager view, captured
  auto f = compile([&](const Tensor& x) {
    buffer.add_(x);
    return row * 1.0;
  });
  try {
    f(ones({2, 3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mul: f32[3]@cpu shares storage with f32[2,3]@cpu, which the traced "
                                         "function modified in place"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(buffer.toVector(), std::vector<float>(6, 0.0f));
}

}  // namespace
}  // namespace kiln
