// The samplers of frontend/data/sampler.h. RandomSampler shuffles as
// DistributedSampler does (a Fisher-Yates shuffle driven by
// std::mt19937_64, written out rather than std::shuffle, whose use of the
// generator is left to the standard library), so that an order is the same
// with every standard library.
#include "frontend/data/sampler.h"

#include <numeric>
#include <random>

#include "runtime/error.h"

namespace kiln::data {

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  KILN_CHECK(size >= 0, "SequentialSampler: a data set of {} examples", size);
}

std::vector<int64_t> SequentialSampler::indices(uint64_t) const {
  std::vector<int64_t> all(static_cast<size_t>(size_));
  std::iota(all.begin(), all.end(), int64_t{0});
  return all;
}

RandomSampler::RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  KILN_CHECK(size >= 0, "RandomSampler: a data set of {} examples", size);
}

std::vector<int64_t> RandomSampler::indices(uint64_t epoch) const {
  std::vector<int64_t> all(static_cast<size_t>(size_));
  std::iota(all.begin(), all.end(), int64_t{0});
  std::mt19937_64 gen(seed_ + epoch);
  for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[gen() % i]);
  return all;
}

std::vector<int64_t> DistributedSamplerView::indices(uint64_t epoch) const {
  DistributedSampler s = sampler_;
  s.setEpoch(epoch);
  return s.indices();
}

BatchSampler::BatchSampler(std::shared_ptr<const Sampler> sampler, int64_t batchSize, bool dropLast)
    : sampler_(std::move(sampler)), batchSize_(batchSize), dropLast_(dropLast) {
  KILN_CHECK(sampler_ != nullptr, "BatchSampler: a null sampler");
  KILN_CHECK(batchSize >= 1, "BatchSampler: batchSize must be at least 1, got {}", batchSize);
}

std::vector<std::vector<int64_t>> BatchSampler::batches(uint64_t epoch) const {
  const std::vector<int64_t> all = sampler_->indices(epoch);
  std::vector<std::vector<int64_t>> out;
  const auto b = static_cast<size_t>(batchSize_);
  for (size_t at = 0; at < all.size(); at += b) {
    const size_t end = std::min(all.size(), at + b);
    if (end - at < b && dropLast_) break;
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

}  // namespace kiln::data
