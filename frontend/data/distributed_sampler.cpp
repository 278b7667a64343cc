// data::DistributedSampler (frontend/data/distributed_sampler.h). The
// shuffle is a Fisher-Yates shuffle driven by std::mt19937_64 seeded with
// seed + epoch, written out rather than std::shuffle (whose use of the
// generator is left to the library): ranks built with different standard
// libraries must agree on the permutation.
#include "frontend/data/distributed_sampler.h"

#include <numeric>
#include <random>

#include "runtime/error.h"

namespace kiln::data {

DistributedSampler::DistributedSampler(int64_t size, int numReplicas, int rank, DistributedSamplerOptions options)
    : size_(size), numReplicas_(numReplicas), rank_(rank), options_(options) {
  KILN_CHECK(size >= 0, "DistributedSampler: a data set of {} samples", size);
  KILN_CHECK(numReplicas >= 1, "DistributedSampler: numReplicas must be at least 1, got {}", numReplicas);
  KILN_CHECK(rank >= 0 && rank < numReplicas, "DistributedSampler: rank {} is not in [0, {})", rank, numReplicas);
  numSamples_ = options.dropLast ? size / numReplicas : (size + numReplicas - 1) / numReplicas;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(size_));
  std::iota(all.begin(), all.end(), int64_t{0});
  if (options_.shuffle) {
    std::mt19937_64 gen(options_.seed + epoch_);
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[gen() % i]);
  }
  const auto total = static_cast<size_t>(totalSize());
  if (all.size() > total) {
    all.resize(total);  // dropLast
  } else {
    // Padding wraps from the start, as often as needed (size < numReplicas).
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(numSamples_));
  for (size_t i = static_cast<size_t>(rank_); i < all.size(); i += static_cast<size_t>(numReplicas_))
    mine.push_back(all[i]);
  return mine;
}

}  // namespace kiln::data
