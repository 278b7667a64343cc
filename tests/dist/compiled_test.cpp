// Collectives inside kiln::compile (docs/distributed.md, "Compiled
// collectives"), ranks as threads over one HashStore: an all_reduce node
// computes what the eager call computes; a compiled DDP training step
// equals the eager DDP step and single-process training on the ranks'
// samples together; each bucket's all-reduce overlaps later steps; noSync
// is a guard; a dead peer fails the compiled call within the timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "frontend/kiln.h"
#include "tests/common/error_of.h"
#include "tests/dist/ddp_fixtures.h"
#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

/// A rank's values: element i of rank r is r + 1 + i / 8.
Tensor rankValues(int r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(r + 1) + static_cast<float>(i) / 8;
  return fromVector(v, {n});
}

TEST(CompiledAllReduce, ComputesWhatTheEagerCallComputes) {
  constexpr int n = 3;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    for (kiln::dist::ReduceOp op : {kiln::dist::ReduceOp::sum, kiln::dist::ReduceOp::avg, kiln::dist::ReduceOp::max}) {
      auto f = kiln::compile([&](const Tensor& x) { return g.allReduced(relu(x) * 2.0, op) + 1.0; });
      const Tensor x = rankValues(r, 10);
      const Tensor compiled = f(x);
      const Tensor again = f(x + 1.0);  // the second call runs the cached program
      EXPECT_EQ(f.numCompiles(), 1);
      EXPECT_NE(f.lastGraph().find("all_reduce("), std::string::npos) << f.lastGraph();
      const Tensor eager = g.allReduced(relu(x) * 2.0, op) + 1.0;
      const Tensor eagerAgain = g.allReduced(relu(x + 1.0) * 2.0, op) + 1.0;
      EXPECT_EQ(maxAbsDiff(compiled, eager), 0.0) << runtime::dist::reduceOpName(op);
      EXPECT_EQ(maxAbsDiff(again, eagerAgain), 0.0) << runtime::dist::reduceOpName(op);
      // Against the reduction computed here: sum over ranks of 2 (q + 1 + i/8).
      const std::vector<float> got = compiled.toVector();
      for (int64_t i = 0; i < 10; ++i) {
        double want = 0;
        for (int q = 0; q < n; ++q) {
          const double v = 2.0 * (q + 1 + static_cast<double>(i) / 8);
          want = op == kiln::dist::ReduceOp::max ? std::max(want, v) : want + v;
        }
        if (op == kiln::dist::ReduceOp::avg) want /= n;
        EXPECT_NEAR(got[static_cast<size_t>(i)], want + 1.0, 1e-5) << runtime::dist::reduceOpName(op) << " at " << i;
      }
    }
  }));
}

// On opencl:0 (PoCL in CI), each rank on a stream of its own: the program's
// kernels are pending on that stream when the start is issued, and the
// group's copies wait for them (Note [Collectives on device streams]); the
// program is not recorded for replay.
TEST(CompiledAllReduce, OnOpenCLTensorsOnTheRanksOwnStreams) {
  std::string why;
  if (!isAvailable(DeviceType::opencl, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    Stream stream = Stream::create(Device::opencl(0));
    StreamGuard guard(stream);
    auto f = kiln::compile([&](const Tensor& x) { return g.allReduced(relu(x) * 2.0, kiln::dist::ReduceOp::sum) + 1.0; });
    const Tensor x = rankValues(r, 40).to(Device::opencl(0));
    for (int call = 0; call < 3; ++call) {
      const std::vector<float> got = f(x).to(Device::cpu()).toVector();
      for (int64_t i = 0; i < 40; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], static_cast<float>(2 * (3 + 2 * static_cast<double>(i) / 8) + 1))
            << "rank " << r << " call " << call << " element " << i;
    }
    EXPECT_EQ(f.lastReplay().replays, 0);
    EXPECT_EQ(f.lastReplay().off, "a program with collectives (Note [Collective steps])");
  }));
}

// An argument that is a transposed view reaches the program with its
// strides: the all-reduce takes it as the values of the view.
TEST(CompiledAllReduce, ANonContiguousArgument) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    auto f = kiln::compile([&](const Tensor& x) { return g.allReduced(x, kiln::dist::ReduceOp::sum); });
    const Tensor x = rankValues(r, 6).view({2, 3}).t();
    const Tensor eager = g.allReduced(x, kiln::dist::ReduceOp::sum);
    EXPECT_EQ(maxAbsDiff(f(x).contiguous(), eager.contiguous()), 0.0) << "rank " << r;
  }));
}

TEST(CompiledAllReduce, InPlaceAllReduceWritesTheEagerTensorAtEveryCall) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    Tensor acc = zeros({4});
    auto f = kiln::compile([&](const Tensor& x) {
      Tensor t = x * 1.0;
      g.allReduce(t).wait();  // complete at once: the program waits where t is read
      acc.add_(t);
      return t;
    });
    const Tensor x = full({4}, static_cast<double>(r + 1));
    EXPECT_EQ(f(x).toVector(), std::vector<float>(4, 3.0f));
    EXPECT_EQ(f(x).toVector(), std::vector<float>(4, 3.0f));
    EXPECT_EQ(acc.toVector(), std::vector<float>(4, 6.0f)) << "the eager tensor is written at each call";
  }));
}

TEST(CompiledAllReduce, OtherCollectivesAreRefusedInsideCompile) {
  auto groups = makeFrontendGroups(1);
  const kiln::dist::ProcessGroup& g = groups[0];
  auto f = kiln::compile([&](const Tensor& x) {
    Tensor t = x * 2.0;
    g.broadcast(t, 0).wait();
    return t;
  });
  EXPECT_EQ(errorOf([&] { f(ones({3})); }),
            "broadcast: f32[3]@cpu inside kiln::compile: only all_reduce is a collective of compiled programs; call "
            "broadcast outside the compiled function");
}

/// Compiled DDP vs eager DDP vs one process on every rank's samples: 6 SGD
/// steps with momentum (compareCompiledDdp). Eager and compiled DDP compute
/// the same ops in the same order but for fusion's reduction order (bias
/// gradients), so they agree within 1e-6; both match single-process
/// training within 1e-5.
void expectCompiledMatchesEager(int ranks) {
  auto groups = makeFrontendGroups(ranks);
  expectNoErrors(runRanks(ranks, [&](int r) {
    const DdpComparison c = compareCompiledDdp(groups[static_cast<size_t>(r)], r, ranks);
    EXPECT_EQ(c.buckets, 3u);
    EXPECT_LE(c.lossVsEager, 1e-6) << "rank " << r;
    EXPECT_LE(c.paramsVsEager, 1e-6) << "rank " << r;
    EXPECT_LE(c.gradsVsEager, 1e-6) << "rank " << r;
    EXPECT_LE(c.paramsVsOneProcess, 1e-5) << "rank " << r;
    EXPECT_EQ(c.compiles, 2) << "the first step makes the momentum buffers (a guard), then one program";
    // One all_reduce per bucket, each started before the backward pass ends
    // but the last: bucket 0's overlaps the backward of two layers.
    ASSERT_EQ(c.overlaps.size(), 3u);
    EXPECT_GE(c.overlaps[0], 3) << "bucket 0's all-reduce runs while the rest of backward computes";
    EXPECT_GE(c.overlaps[1], 1);
  }));
}

TEST(CompiledDDP, TwoRanksMatchEagerDDPAndOneProcess) { expectCompiledMatchesEager(2); }
TEST(CompiledDDP, ThreeRanksMatchEagerDDPAndOneProcess) { expectCompiledMatchesEager(3); }

TEST(CompiledDDP, NoSyncIsAGuardAndAccumulatesLocally) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    nn::Sequential model = makeDdpMlp(), ref = makeDdpMlp();
    nn::DistributedDataParallel ddp(model, smallBuckets(g));
    auto backward = kiln::compile([&](const Tensor& x, const Tensor& y) {
      Tensor loss = mseLoss(ddp(x), y);
      loss.backward();
      return loss;
    });
    const auto [x0, y0] = ddpSamples(r * 4, 4, 0);
    const auto [x1, y1] = ddpSamples(r * 4, 4, 1);
    {
      auto guard = ddp->noSync();
      backward(x0, y0);  // local gradients only
      EXPECT_TRUE(backward.lastCollectiveOverlaps().empty()) << "noSync: no all-reduce";
    }
    backward(x1, y1);  // sync: a second program, the averaged sum of both micro-batches
    EXPECT_EQ(backward.numCompiles(), 2) << "the noSync program's guard fails outside noSync";
    EXPECT_EQ(backward.lastCollectiveOverlaps().size(), 3u);
    // One process: the mean over ranks of each rank's two micro-batch gradients.
    Tensor loss;
    for (int q = 0; q < n; ++q)
      for (int it = 0; it < 2; ++it) {
        const auto [x, y] = ddpSamples(q * 4, 4, it);
        loss = mseLoss(ref(x), y) * (1.0 / n);
        loss.backward();
      }
    const std::vector<Tensor> mine = ddp->parameters(), want = ref->parameters();
    for (size_t k = 0; k < mine.size(); ++k)
      EXPECT_LE(maxAbsDiff(mine[k].grad(), want[k].grad()), 1e-6) << "rank " << r << " parameter " << k;
  }));
}

TEST(CompiledDDP, FindUnusedParametersIsRefusedWithTheReason) {
  auto groups = makeFrontendGroups(1);
  nn::Sequential model = makeDdpMlp();
  nn::DistributedDataParallel ddp(
      model, nn::DistributedDataParallelOptions{.processGroup = groups[0], .findUnusedParameters = true});
  auto f = kiln::compile([&](const Tensor& x) { return ddp(x); });
  const std::string e = errorOf([&] { f(ones({2, 6})); });
  EXPECT_EQ(e.rfind("DistributedDataParallel: findUnusedParameters is not supported inside kiln::compile", 0), 0u)
      << e;
}

TEST(CompiledDDP, ADeadPeerFailsTheCompiledStepWithinTheTimeout) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n, 2s);
  std::string error;
  double took = 0;
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    nn::Sequential model = makeDdpMlp();
    nn::DistributedDataParallel ddp(model, smallBuckets(g));
    optim::SGD opt(ddp->parameters(), {.lr = 0.1});
    auto step = compileSgdStep(ddp, opt);
    const auto [x, y] = ddpSamples(r * 4, 4, 0);
    step(x, y);
    step(x, y);
    if (r == 1) {
      g.abort();  // this rank dies between steps
      return;
    }
    const std::vector<float> before = ddp->parameters()[0].toVector();
    const auto start = std::chrono::steady_clock::now();
    error = errorOf([&] { step(x, y); });
    took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(ddp->parameters()[0].toVector(), before) << "a failed step leaves the parameters as they were";
  }));
  EXPECT_NE(error.find("all_reduce: sequence"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 left the group"), std::string::npos) << error;
  EXPECT_LT(took, 3.0) << "within the timeout + 1 s";
}

}  // namespace
}  // namespace kiln::testing::dist
