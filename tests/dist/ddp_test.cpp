// nn::DistributedDataParallel and data::DistributedSampler, ranks as
// threads over one HashStore (tests/dist/harness.h). DDP training on R ranks
// must equal single-process training on the R ranks' samples together, as
// PyTorch's _test_DDP_niter; buckets must start their all-reduces during
// backward; noSync must accumulate locally and reduce the sum; unused
// parameters must be named, or tolerated with findUnusedParameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "frontend/kiln.h"
#include "tests/common/error_of.h"
#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

/// Gives every parameter of `m` fixed values; `perturb` shifts them (a rank
/// whose replica starts elsewhere than rank 0's).
void initialize(nn::Module& m, double perturb) {
  NoGradGuard noGrad;
  int j = 0;
  for (const Tensor& p : m.parameters()) {
    std::vector<float> v(static_cast<size_t>(p.numel()));
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<float>(0.3 * std::sin(1.3 * static_cast<double>(k) + j) + perturb);
    p.detach().copy_(fromVector(v, p.shape()));
    ++j;
  }
}

/// Linear(4, 8), Softplus, Linear(8, 1): parameters 0.weight (32 floats),
/// 0.bias (8), 2.weight (8), 2.bias (1).
nn::Sequential makeMlp(double perturb = 0.0, int64_t hidden = 8) {
  nn::Sequential m(nn::Linear(4, hidden), nn::Softplus(), nn::Linear(hidden, 1));
  initialize(*m.ptr(), perturb);
  return m;
}

/// Samples [first, first + count) of a fixed data set: inputs [count, 4], targets [count, 1].
std::pair<Tensor, Tensor> samples(int64_t first, int64_t count, double phase = 0.0) {
  std::vector<float> x, y;
  for (int64_t i = first; i < first + count; ++i) {
    for (int f = 0; f < 4; ++f)
      x.push_back(static_cast<float>(std::cos(0.7 * static_cast<double>(i) + 1.1 * f + phase)));
    y.push_back(static_cast<float>(std::sin(0.5 * static_cast<double>(i) + phase)));
  }
  return {fromVector(x, {count, 4}), fromVector(y, {count, 1})};
}

double maxDiff(const Tensor& a, const Tensor& b) {
  EXPECT_TRUE(a.defined() && b.defined());
  if (!a.defined() || !b.defined()) return 1e9;
  const std::vector<float> va = a.toVector(), vb = b.toVector();
  EXPECT_EQ(va.size(), vb.size());
  double d = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) d = std::max(d, std::abs(double{va[i]} - double{vb[i]}));
  return d;
}

/// DDP on `ranks` ranks × `perRank` samples vs one process on all of them:
/// SGD, 5 steps, parameters within 1e-6 after every step.
void expectMatchesSingleProcess(int ranks, int64_t perRank) {
  auto groups = makeFrontendGroups(ranks);
  expectNoErrors(runRanks(ranks, [&](int r) {
    nn::Sequential model = makeMlp(r == 0 ? 0.0 : 0.5 * r);  // replicas differ until the broadcast
    nn::DistributedDataParallel ddp(model,
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)]});
    nn::Sequential ref = makeMlp();
    const std::vector<Tensor> mine = ddp->parameters(), theirs = ref->parameters();
    ASSERT_EQ(mine.size(), 4u);
    for (size_t k = 0; k < mine.size(); ++k) EXPECT_EQ(maxDiff(mine[k], theirs[k]), 0.0) << "broadcast from rank 0";
    optim::SGD opt(mine, {.lr = 0.1});
    optim::SGD refOpt(theirs, {.lr = 0.1});
    const auto [x, y] = samples(r * perRank, perRank);
    const auto [xAll, yAll] = samples(0, ranks * perRank);
    for (int it = 0; it < 5; ++it) {
      const std::vector<float> before = mine[0].toVector();
      opt.zeroGrad();
      mseLoss(ddp(x), y).backward();
      opt.step();
      refOpt.zeroGrad();
      mseLoss(ref(xAll), yAll).backward();
      refOpt.step();
      EXPECT_NE(mine[0].toVector(), before) << "a step changes the parameters";
      for (size_t k = 0; k < mine.size(); ++k)
        EXPECT_LE(maxDiff(mine[k], theirs[k]), 1e-6) << "rank " << r << " iteration " << it << " parameter " << k;
    }
  }));
}

TEST(DDP, TwoRanksMatchSingleProcess) { expectMatchesSingleProcess(2, 8); }
TEST(DDP, ThreeRanksMatchSingleProcess) { expectMatchesSingleProcess(3, 4); }

TEST(DDP, BucketsLaunchDuringBackward) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    nn::Sequential model = makeMlp();
    // Registered before DDP's hook, so it runs first: what DDP launched
    // before the gradient of parameter 0 (0.weight, the last) was complete.
    nn::DistributedDataParallelImpl* seen = nullptr;
    size_t launchedBeforeLast = 99;
    autograd::registerPostAccumulateGradHook(model->parameters()[0],
                                             [&](const Tensor&) { launchedBeforeLast = seen->bucketsLaunched(); });
    nn::DistributedDataParallel ddp(
        model, nn::DistributedDataParallelOptions{
                   .processGroup = groups[static_cast<size_t>(r)], .bucketCapBytes = 32, .firstBucketCapBytes = 32});
    seen = ddp.get();
    // Reverse order, closing at >= 32 bytes: {2.bias 4 B, 2.weight 32 B}, {0.bias}, {0.weight}.
    EXPECT_EQ(ddp->bucketAssignment(), (std::vector<std::vector<size_t>>{{3, 2}, {1}, {0}}));
    const auto [x, y] = samples(r * 8, 8);
    mseLoss(ddp(x), y).backward();
    EXPECT_GE(launchedBeforeLast, 1u) << "bucket 0 started before the last gradient";
    EXPECT_LT(launchedBeforeLast, 3u) << "bucket 2 holds parameter 0 and cannot have started";
    EXPECT_EQ(ddp->bucketsLaunched(), 3u);
    nn::Sequential ref = makeMlp();
    const auto [xAll, yAll] = samples(0, 16);
    mseLoss(ref(xAll), yAll).backward();
    for (size_t k = 0; k < 4; ++k)
      EXPECT_LE(maxDiff(ddp->parameters()[k].grad(), ref->parameters()[k].grad()), 1e-6) << "parameter " << k;
  }));
}

TEST(DDP, NoSyncAccumulatesLocallyThenReducesTheSum) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    nn::Sequential model = makeMlp();
    nn::DistributedDataParallel ddp(model,
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)]});
    const auto [x1, y1] = samples(r * 8, 8);
    const auto [x2, y2] = samples(r * 8, 8, 0.25);
    {
      auto guard = ddp->noSync();
      mseLoss(ddp(x1), y1).backward();
    }
    nn::Sequential local = makeMlp();
    mseLoss(local(x1), y1).backward();
    for (size_t k = 0; k < 4; ++k)
      EXPECT_LE(maxDiff(ddp->parameters()[k].grad(), local->parameters()[k].grad()), 1e-7)
          << "noSync: this rank's gradient, not reduced";
    mseLoss(ddp(x2), y2).backward();
    nn::Sequential ref = makeMlp();
    const auto [x1All, y1All] = samples(0, 16);
    const auto [x2All, y2All] = samples(0, 16, 0.25);
    mseLoss(ref(x1All), y1All).backward();
    mseLoss(ref(x2All), y2All).backward();
    for (size_t k = 0; k < 4; ++k)
      EXPECT_LE(maxDiff(ddp->parameters()[k].grad(), ref->parameters()[k].grad()), 1e-6) << "parameter " << k;
  }));
}

/// Two heads; forward uses b only when useB.
class TwoHeadsImpl : public nn::Module {
 public:
  explicit TwoHeadsImpl(bool useB) : Module("TwoHeads"), useB(useB) {
    a = registerModule("a", nn::Linear(4, 2));
    b = registerModule("b", nn::Linear(4, 2));
    initialize(*this, 0.0);
  }
  Tensor forward(const Tensor& x) override { return useB ? a(x) + b(x) : a(x); }
  nn::Linear a{nullptr}, b{nullptr};
  bool useB;
};
KILN_MODULE(TwoHeads);

TEST(DDP, UnusedParameterErrorNamesIt) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    nn::DistributedDataParallel ddp(TwoHeads(false),
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)]});
    const auto [x, y] = samples(r * 8, 8);
    const Tensor loss = sum(ddp(x));
    const std::string e = errorOf([&] { loss.backward(); });
    EXPECT_NE(e.find("2 parameter(s) received no gradient in iteration 0 on rank " + std::to_string(r) +
                     ": b.weight, b.bias"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("findUnusedParameters = true"), std::string::npos) << e;
    EXPECT_EQ(e.find("a.weight"), std::string::npos) << e;
  }));
}

TEST(DDP, FindUnusedParametersCountsThemAsZero) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    // Rank 0 does not use head b, rank 1 does: b's gradient is rank 1's / 2.
    TwoHeads model(r == 1);
    nn::DistributedDataParallel ddp(model,
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)],
                                                                       .findUnusedParameters = true});
    std::vector<std::vector<Tensor>> local;  // each rank's own gradients
    for (int q = 0; q < n; ++q) {
      TwoHeads m(q == 1);
      const auto [x, y] = samples(q * 8, 8);
      sum(m(x)).backward();
      local.push_back({m->a->weight.grad(), m->a->bias.grad(), m->b->weight.grad(), m->b->bias.grad()});
    }
    ASSERT_FALSE(local[0][2].defined());
    for (int it = 0; it < 2; ++it) {
      ddp->zeroGrad();
      const auto [x, y] = samples(r * 8, 8);
      sum(ddp(x)).backward();
      const std::vector<Tensor> got = {model->a->weight.grad(), model->a->bias.grad(), model->b->weight.grad(),
                                       model->b->bias.grad()};
      for (size_t k = 0; k < 2; ++k) EXPECT_LE(maxDiff(got[k], (local[0][k] + local[1][k]) * 0.5), 1e-6) << k;
      for (size_t k = 2; k < 4; ++k) EXPECT_LE(maxDiff(got[k], local[1][k] * 0.5), 1e-6) << "head b " << k;
    }
  }));
  // Unused on every rank: no error, and b keeps no gradient.
  groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    TwoHeads model(false);
    nn::DistributedDataParallel ddp(model,
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)],
                                                                       .findUnusedParameters = true});
    const auto [x, y] = samples(r * 8, 8);
    sum(ddp(x)).backward();
    EXPECT_TRUE(model->a->weight.grad().defined());
    EXPECT_FALSE(model->b->weight.grad().defined());
  }));
}

TEST(DDP, GradientForAParameterFoundUnusedIsAnError) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    TwoHeads model(false);
    nn::DistributedDataParallel ddp(model,
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)],
                                                                       .findUnusedParameters = true});
    const auto [x, y] = samples(r * 8, 8);
    // b.weight is not in forward's graph but reaches the loss another way.
    const Tensor loss = sum(ddp(x)) + sum(model->b->weight);
    EXPECT_EQ(errorOf([&] { loss.backward(); }),
              "DistributedDataParallel: parameter 'b.weight' got a second gradient in iteration 0 (forward found it "
              "unused, or backward accumulated into it twice)");
  }));
}

/// An f32 Linear scaled by an f64 parameter: two dtypes, two buckets.
class MixedImpl : public nn::Module {
 public:
  MixedImpl() : Module("Mixed") {
    a = registerModule("a", nn::Linear(4, 2));
    scale = registerParameter("scale", fromVector(std::vector<double>{0.5, -1.5}, {2}));
    initialize(*a.ptr(), 0.0);
  }
  Tensor forward(const Tensor& x) override { return a(x) * scale.to(DType::f32); }
  nn::Linear a{nullptr};
  Tensor scale;
};
KILN_MODULE(Mixed);

TEST(DDP, BucketsByDType) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    Mixed model;
    nn::DistributedDataParallel ddp(model,
                                    nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)]});
    // Parameters: scale (the module's own first), a.weight, a.bias; reversed
    // and split by dtype: f32 {a.bias, a.weight}, then f64 {scale}.
    EXPECT_EQ(ddp->bucketAssignment(), (std::vector<std::vector<size_t>>{{2, 1}, {0}}));
    std::vector<std::vector<Tensor>> local;
    for (int q = 0; q < n; ++q) {
      Mixed m;
      const auto [x, y] = samples(q * 8, 8);
      sum(m(x)).backward();
      local.push_back({m->a->weight.grad(), m->a->bias.grad(), m->scale.grad()});
    }
    const auto [x, y] = samples(r * 8, 8);
    sum(ddp(x)).backward();
    EXPECT_LE(maxDiff(model->a->weight.grad(), (local[0][0] + local[1][0]) * 0.5), 1e-6);
    EXPECT_LE(maxDiff(model->a->bias.grad(), (local[0][1] + local[1][1]) * 0.5), 1e-6);
    ASSERT_EQ(model->scale.grad().dtype(), DType::f64);
    const std::vector<double> got = model->scale.grad().toVector<double>();
    const std::vector<double> l0 = local[0][2].toVector<double>(), l1 = local[1][2].toVector<double>();
    for (size_t k = 0; k < 2; ++k) EXPECT_NEAR(got[k], (l0[k] + l1[k]) / 2, 1e-9);
  }));
}

TEST(DDP, ParameterShapeMismatchNamesRankAndParameter) {
  constexpr int n = 2;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    nn::Sequential model = makeMlp(0.0, r == 1 ? 6 : 8);
    const std::string e = errorOf([&] {
      nn::DistributedDataParallel ddp(
          model, nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)]});
    });
    EXPECT_EQ(e,
              "DistributedDataParallel: parameter 0 '0.weight' is f32[6,4] on rank 1 but f32[8,4] on rank 0 (every "
              "rank must build the same model)");
  }));
}

TEST(DDP, ParameterCountMismatchNamesTheRank) {
  constexpr int n = 3;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    // Rank 2's last layer has no bias: 3 parameters instead of 4.
    nn::Sequential model(nn::Linear(4, 8), nn::Softplus(), nn::Linear(8, 1, /*bias=*/r != 2));
    const std::string e = errorOf([&] {
      nn::DistributedDataParallel ddp(
          model, nn::DistributedDataParallelOptions{.processGroup = groups[static_cast<size_t>(r)]});
    });
    EXPECT_EQ(e, "DistributedDataParallel: rank 2 has 3 parameters, rank 0 has 4");
  }));
}

std::vector<std::vector<int64_t>> shards(int64_t size, int ranks, data::DistributedSamplerOptions options,
                                         uint64_t epoch = 0) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < ranks; ++r) {
    data::DistributedSampler s(size, ranks, r, options);
    s.setEpoch(epoch);
    out.push_back(s.indices());
    EXPECT_EQ(static_cast<int64_t>(out.back().size()), s.numSamples());
  }
  return out;
}

TEST(DistributedSampler, PadsByWrappingAndStrides) {
  EXPECT_EQ(shards(10, 3, {.shuffle = false}),
            (std::vector<std::vector<int64_t>>{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}}));
  EXPECT_EQ(shards(10, 3, {.shuffle = false, .dropLast = true}),
            (std::vector<std::vector<int64_t>>{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
  EXPECT_EQ(shards(2, 5, {.shuffle = false}), (std::vector<std::vector<int64_t>>{{0}, {1}, {0}, {1}, {0}}));
  EXPECT_EQ(shards(9, 3, {.shuffle = false}), (std::vector<std::vector<int64_t>>{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}));
}

TEST(DistributedSampler, ShuffleIsOnePermutationPerEpoch) {
  const auto e0 = shards(12, 3, {.seed = 7}, 0);
  std::vector<int64_t> all;
  for (const auto& s : e0) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(12);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected) << "the ranks together cover the data set once";
  EXPECT_NE(e0, shards(12, 3, {.shuffle = false})) << "shuffled";
  EXPECT_EQ(e0, shards(12, 3, {.seed = 7}, 0)) << "deterministic";
  EXPECT_NE(e0, shards(12, 3, {.seed = 7}, 1)) << "setEpoch changes the order";
  EXPECT_EQ(shards(12, 3, {.seed = 6}, 1), shards(12, 3, {.seed = 7}, 0)) << "seeded by seed + epoch";
}

TEST(DistributedSampler, Errors) {
  EXPECT_EQ(errorOf([] { data::DistributedSampler(10, 3, 3); }), "DistributedSampler: rank 3 is not in [0, 3)");
  EXPECT_EQ(errorOf([] { data::DistributedSampler(10, 0, 0); }),
            "DistributedSampler: numReplicas must be at least 1, got 0");
}

}  // namespace
}  // namespace kiln::testing::dist
