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

}  // namespace kiln::testing::dist
