// Graph replay (Note [Graph replay] in runtime/executable_replay.cpp) on
// every test device: replayed training steps equal steps run kernel by
// kernel, bit for bit; what a call returned survives the next call; an
// input that moves is staged, one that must be read in place records
// again, and replay gives up after its limit; the CPU records nothing.
#include <gtest/gtest.h>

#include "device/device_list.h"
#include "runtime/executable.h"

namespace kiln::testing {
namespace {

class DeviceReplay : public DeviceTest {
 protected:
  bool records() const { return runtime::deviceInterface(device()).canRecord(nullptr); }
};

/// Four AdamW steps of three blocks of scale, tanh and layer norm with
/// dropout (no matmul: CLBlast's cannot be recorded), each step on a batch
/// of its own; gradients are cleared after the update, so that the step's
/// only output is its loss. The losses, and the parameters after.
struct TrainRun {
  std::vector<Tensor> losses, params;
  runtime::ReplayInfo replay;
  int kernels = 0;
};
TrainRun train(Device dev, runtime::GraphReplay replay) {
  manualSeed(11);
  std::vector<Tensor> params;
  std::vector<nn::LayerNorm> norms;
  for (int b = 0; b < 3; ++b) {
    params.push_back(values({16}, 0.5f + 0.1f * static_cast<float>(b)).to(dev));
    norms.emplace_back(std::vector<int64_t>{16});
    norms.back()->to(dev);
  }
  for (Tensor& p : params) p.setRequiresGrad();
  for (auto& n : norms)
    for (const Tensor& p : n->parameters()) params.push_back(p);
  nn::Dropout drop(0.25);
  optim::AdamW adam(params, optim::AdamWOptions{.lr = 0.01});
  auto step = compile(
      [&](const Tensor& x, const Tensor& target) {
        Tensor h = x;
        for (int b = 0; b < 3; ++b)
          h = norms[static_cast<size_t>(b)]->forward(drop->forward(kiln::tanh(h * params[static_cast<size_t>(b)])));
        Tensor loss = mseLoss(h, target);
        loss.backward();
        adam.step();
        adam.zeroGrad();
        return loss;
      },
      CompileOptions{.graphReplay = replay});
  const Tensor target = values({5, 16}, 0.75f).to(dev);
  TrainRun run;
  std::vector<Tensor> batches;  // alive, so that each call's batch is somewhere else
  for (int i = 0; i < 4; ++i) {
    batches.push_back(values({5, 16}, 1.0f + 0.25f * static_cast<float>(i)).to(dev));
    run.losses.push_back(step(batches.back(), target));
  }
  run.params = params;
  run.replay = step.lastReplay();
  run.kernels = step.lastNumKernels();
  return run;
}

TEST_P(DeviceReplay, ReplayedTrainingStepsEqualStepsRunKernelByKernel) {
  // Recorded whenever the device can: kiln fuses this step into a few
  // kernels, too few for a replay to enqueue fewer commands.
  const TrainRun replayed = train(device(), runtime::GraphReplay::always),
                 direct = train(device(), runtime::GraphReplay::off);
  if (records()) {
    EXPECT_EQ(replayed.replay.recordings, 1) << replayed.replay.off;
    EXPECT_EQ(replayed.replay.replays, 3) << "the first call runs kernel by kernel, the next three replay";
    EXPECT_EQ(replayed.replay.stagedInputs, 1) << "the batch moves; the parameters, moments and target stay";
  } else {
    EXPECT_EQ(replayed.replay.recordings, 0);
    EXPECT_NE(replayed.replay.off.find("does not record"), std::string::npos) << replayed.replay.off;
  }
  EXPECT_EQ(direct.replay.recordings, 0);
  // Every loss, read only now: a later call's replay must not have
  // overwritten an earlier call's output.
  for (size_t i = 0; i < direct.losses.size(); ++i)
    EXPECT_TRUE(sameBits(replayed.losses[i], direct.losses[i])) << "loss of step " << i;
  for (size_t i = 0; i < direct.params.size(); ++i)
    EXPECT_TRUE(sameBits(replayed.params[i], direct.params[i])) << "parameter " << i;
}

/// Several kernels (row and column reductions, one after the other), one
/// output, and x itself as a result, so that x must be read where the
/// caller has it.
Tensor normalized(const Tensor& x, const Tensor& w = {}) {
  const Tensor rows = layerNorm(x, {6}, w);
  return sum(layerNorm(rows * sum(rows, {0}), {6}) * 2.0);
}
std::vector<Tensor> normalizedSum(const Tensor& x) { return {x, normalized(x)}; }

TEST_P(DeviceReplay, AnInputReadInPlaceThatMovesRecordsAgainUntilTheLimit) {
  const Device dev = device();
  auto f = compile(normalizedSum);
  std::vector<Tensor> alive;  // so that no call's x lands where an earlier one was
  for (int call = 0; call < 8; ++call) {
    const Tensor x = values({4, 6}, 1.0f + static_cast<float>(call)).to(dev);
    alive.push_back(x);
    const std::vector<Tensor> out = f(x);
    const std::vector<Tensor> expected = normalizedSum(x);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].impl()->storage, x.impl()->storage) << "a returned argument is that tensor";
    EXPECT_TRUE(allClose(out[1], expected[1], 1e-5, 1e-5)) << "call " << call;
  }
  ASSERT_GE(f.lastNumKernels(), 3) << "a recording pays only for a program of several kernels";
  const runtime::ReplayInfo info = f.lastReplay();
  if (!records()) {
    EXPECT_EQ(info.recordings, 0);
    return;
  }
  EXPECT_EQ(info.recordings, 4) << "every call after the first moved x; four recordings, then no more";
  EXPECT_NE(info.off.find("moved after 4 recordings"), std::string::npos) << info.off;
}

TEST_P(DeviceReplay, AnInputThatMovesIsStagedAndTheResultsFollowIt) {
  const Device dev = device();
  const Tensor w = values({6}, 0.5f).to(dev);
  auto f = compile([&](const Tensor& x) { return normalized(x, w); });
  const Tensor a = values({4, 6}, 1.0f).to(dev), b = values({4, 6}, 2.0f).to(dev);
  const std::vector<Tensor> order{a, a, b, a, b, b};
  for (size_t i = 0; i < order.size(); ++i)
    EXPECT_TRUE(allClose(f(order[i]), normalized(order[i], w), 1e-5, 1e-5)) << "call " << i;
  const runtime::ReplayInfo info = f.lastReplay();
  if (!records()) return;
  // a, a: recorded with x in place; b moved it: recorded again with x
  // staged, which then serves every call.
  EXPECT_EQ(info.recordings, 2);
  EXPECT_EQ(info.stagedInputs, 1);
  EXPECT_EQ(info.replays, 5);
  EXPECT_LT(info.commandsPerRun, f.lastNumKernels()) << "recorded because a replay enqueues fewer commands";
}

TEST_P(DeviceReplay, OneKernelTwiceInARecordingKeepsEachLaunchsArguments) {
  // The same kernel over two pairs of buffers: a recording that read its
  // kernels' arguments at replay would run both launches on the second pair
  // (PoCL's bug: Note [Command buffers on PoCL]).
  const Device dev = device();
  auto f = compile(
      [](const Tensor& a, const Tensor& b) {
        return std::vector<Tensor>{kiln::exp(a) * 2.0, kiln::exp(b) * 2.0};
      },
      CompileOptions{.graphReplay = runtime::GraphReplay::always});
  const Tensor a = values({64}, 1.0f).to(dev), b = values({64}, 0.5f).to(dev);
  for (int call = 0; call < 3; ++call) {
    const std::vector<Tensor> out = f(a, b);
    EXPECT_TRUE(sameBits(out[0], kiln::exp(a) * 2.0)) << "call " << call;
    EXPECT_TRUE(sameBits(out[1], kiln::exp(b) * 2.0)) << "call " << call;
  }
  ASSERT_EQ(f.lastNumKernels(), 2);
  if (records()) {
    EXPECT_EQ(f.lastReplay().replays, 2);
  }
}

TEST_P(DeviceReplay, GraphReplayOffRunsKernelByKernel) {
  const Device dev = device();
  auto f =
      compile([](const Tensor& x) { return normalized(x); }, CompileOptions{.graphReplay = runtime::GraphReplay::off});
  const Tensor x = values({4, 6}).to(dev);
  for (int i = 0; i < 3; ++i) f(x);
  const int64_t before = runtime::kernelLaunchCount();
  f(x);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, f.lastNumKernels());
  EXPECT_EQ(f.lastReplay().recordings, 0);
}

KILN_INSTANTIATE_DEVICE_TESTS(DeviceReplay);

}  // namespace
}  // namespace kiln::testing
