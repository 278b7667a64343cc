// The model and data of the compiled-DDP tests, shared by the threads
// (tests/dist/compiled_test.cpp) and the processes
// (tests/dist/worker/dist_worker.cpp): a small MLP with fixed weights and
// a deterministic data set, so every rank and the single-process reference
// start from the same point.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::testing::dist {

/// Linear(6, 16), Softplus, Linear(16, 16), Softplus, Linear(16, 3), fixed weights.
inline nn::Sequential makeDdpMlp() {
  nn::Sequential m(nn::Linear(6, 16), nn::Softplus(), nn::Linear(16, 16), nn::Softplus(), nn::Linear(16, 3));
  NoGradGuard noGrad;
  int j = 0;
  for (const Tensor& p : m->parameters()) {
    std::vector<float> v(static_cast<size_t>(p.numel()));
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(0.4 * std::sin(0.9 * static_cast<double>(k) + j));
    p.detach().copy_(fromVector(v, p.shape()));
    ++j;
  }
  return m;
}

/// Samples [first, first + count) of step `step`: inputs [count, 6], targets [count, 3].
inline std::pair<Tensor, Tensor> ddpSamples(int64_t first, int64_t count, int step) {
  std::vector<float> x, y;
  for (int64_t i = first; i < first + count; ++i) {
    for (int f = 0; f < 6; ++f) x.push_back(static_cast<float>(std::cos(0.3 * static_cast<double>(i) + 0.7 * f + step)));
    for (int f = 0; f < 3; ++f) y.push_back(static_cast<float>(std::sin(0.2 * static_cast<double>(i) + f - step)));
  }
  return {fromVector(x, {count, 6}), fromVector(y, {count, 3})};
}

/// Buckets of 256 bytes: {4.bias, 4.weight}, {2.bias, 2.weight}, {0.bias, 0.weight}.
inline nn::DistributedDataParallelOptions smallBuckets(const kiln::dist::ProcessGroup& g) {
  return {.processGroup = g, .bucketCapBytes = 256, .firstBucketCapBytes = 256};
}

/// The largest absolute difference of two f32 tensors of one shape (1e9 when
/// either is undefined or the sizes differ).
inline double maxAbsDiff(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return 1e9;
  const std::vector<float> va = a.toVector(), vb = b.toVector();
  if (va.size() != vb.size()) return 1e9;
  double d = 0;
  for (size_t i = 0; i < va.size(); ++i) d = std::max(d, std::abs(double{va[i]} - double{vb[i]}));
  return d;
}

/// One SGD step of `ddp` (zeroGrad, mseLoss forward through it, backward,
/// step) under kiln::compile; returns the loss.
inline auto compileSgdStep(nn::DistributedDataParallel& ddp, optim::SGD& opt) {
  return kiln::compile([&ddp, &opt](const Tensor& x, const Tensor& y) {
    opt.zeroGrad();
    Tensor loss = mseLoss(ddp(x), y);
    loss.backward();
    opt.step();
    return loss;
  });
}

/// What compareCompiledDdp measured: the largest differences over every
/// step of the compiled DDP step against eager DDP (loss, parameters, .grad)
/// and against one process on every rank's samples (parameters).
struct DdpComparison {
  double lossVsEager = 0, paramsVsEager = 0, gradsVsEager = 0, paramsVsOneProcess = 0;
  int compiles = 0;
  std::vector<int> overlaps;  ///< of the compiled program's collectives
  size_t buckets = 0;
};

/// `steps` SGD steps with momentum on rank `rank` of `world` (4 samples a
/// rank): eager DDP, the same step compiled, and one process on all the
/// ranks' samples, from the same weights.
inline DdpComparison compareCompiledDdp(const kiln::dist::ProcessGroup& g, int rank, int world, int steps = 6) {
  constexpr int64_t kPerRank = 4;
  nn::Sequential eagerModel = makeDdpMlp(), compiledModel = makeDdpMlp(), ref = makeDdpMlp();
  nn::DistributedDataParallel eager(eagerModel, smallBuckets(g));
  nn::DistributedDataParallel compiled(compiledModel, smallBuckets(g));
  optim::SGD eagerOpt(eager->parameters(), {.lr = 0.2, .momentum = 0.9});
  optim::SGD compiledOpt(compiled->parameters(), {.lr = 0.2, .momentum = 0.9});
  optim::SGD refOpt(ref->parameters(), {.lr = 0.2, .momentum = 0.9});
  auto step = compileSgdStep(compiled, compiledOpt);
  DdpComparison out;
  out.buckets = compiled->bucketAssignment().size();
  for (int it = 0; it < steps; ++it) {
    const auto [x, y] = ddpSamples(rank * kPerRank, kPerRank, it);
    const auto [xAll, yAll] = ddpSamples(0, world * kPerRank, it);
    eagerOpt.zeroGrad();
    const Tensor eagerLoss = mseLoss(eager(x), y);
    eagerLoss.backward();
    eagerOpt.step();
    const Tensor compiledLoss = step(x, y);
    refOpt.zeroGrad();
    mseLoss(ref(xAll), yAll).backward();
    refOpt.step();
    out.lossVsEager = std::max(out.lossVsEager, maxAbsDiff(compiledLoss, eagerLoss));
    const std::vector<Tensor> e = eager->parameters(), c = compiled->parameters(), o = ref->parameters();
    for (size_t k = 0; k < e.size(); ++k) {
      out.paramsVsEager = std::max(out.paramsVsEager, maxAbsDiff(c[k], e[k]));
      out.gradsVsEager = std::max(out.gradsVsEager, maxAbsDiff(c[k].grad(), e[k].grad()));
      out.paramsVsOneProcess = std::max(out.paramsVsOneProcess, maxAbsDiff(c[k], o[k]));
    }
  }
  out.compiles = step.numCompiles();
  out.overlaps = step.lastCollectiveOverlaps();
  return out;
}

}  // namespace kiln::testing::dist
