// Samplers: which examples of a random-access data set an epoch reads, and
// in which order, as torch.utils.data's samplers. A sampler is a pure
// function of the epoch, so that an epoch's order is reproducible and does
// not depend on how many workers load it:
//
//   SequentialSampler(5).indices(0);          // {0, 1, 2, 3, 4}
//   RandomSampler(5, /*seed=*/7).indices(1);  // a permutation seeded by 7 + 1
//   BatchSampler(std::make_shared<SequentialSampler>(5), 2, /*dropLast=*/false).batches(0);
//                                             // {{0, 1}, {2, 3}, {4}}
//
// data::DistributedSampler (distributed_sampler.h) is a rank's share of the
// data set; DistributedSamplerView wraps it as a Sampler for the loader.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "frontend/data/distributed_sampler.h"

namespace kiln::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The indices of epoch `epoch`, in the order they are read.
  virtual std::vector<int64_t> indices(uint64_t epoch) const = 0;
};

/// 0, 1, ..., size-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size);
  std::vector<int64_t> indices(uint64_t epoch) const override;

 private:
  int64_t size_;
};

/// A permutation of 0..size-1 drawn from a generator seeded by seed + epoch:
/// the same for the same (seed, epoch), different from one epoch to the next.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t size, uint64_t seed);
  std::vector<int64_t> indices(uint64_t epoch) const override;

 private:
  int64_t size_;
  uint64_t seed_;
};

/// The indices of a DistributedSampler (this rank's share), whose own
/// setEpoch is overridden by the epoch asked for.
class DistributedSamplerView : public Sampler {
 public:
  explicit DistributedSamplerView(DistributedSampler sampler) : sampler_(std::move(sampler)) {}
  std::vector<int64_t> indices(uint64_t epoch) const override;

 private:
  DistributedSampler sampler_;
};

/// Groups a sampler's indices into batches of batchSize, in order; the last
/// one is shorter unless dropLast drops it.
class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<const Sampler> sampler, int64_t batchSize, bool dropLast);
  std::vector<std::vector<int64_t>> batches(uint64_t epoch) const;

 private:
  std::shared_ptr<const Sampler> sampler_;
  int64_t batchSize_;
  bool dropLast_;
};

}  // namespace kiln::data
