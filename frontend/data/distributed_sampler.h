// data::DistributedSampler: which samples of a data set each rank reads in
// data-parallel training, as torch.utils.data.DistributedSampler. The
// indices 0..size-1 (shuffled by seed + epoch when `shuffle`, the same
// permutation on every rank) are padded by wrapping around from the start
// to a multiple of the number of ranks, or cut down to one with dropLast;
// rank r takes every numReplicas-th index from r (idx[r::R]). Every rank so
// gets numSamples() indices and the ranks together cover the data set.
//
//   data::DistributedSampler sampler(10, /*numReplicas=*/3, /*rank=*/1, {.shuffle = false});
//   sampler.indices();   // {1, 4, 7, 0}
//
// Call setEpoch(e) at the start of each epoch for a new order.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::data {

struct DistributedSamplerOptions {
  bool shuffle = true;
  /// The permutation's seed; it must be the same on every rank.
  uint64_t seed = 0;
  /// Drop the tail that does not divide evenly instead of padding.
  bool dropLast = false;
};

class DistributedSampler {
 public:
  /// `size` samples shared by `numReplicas` ranks, as seen by `rank`.
  DistributedSampler(int64_t size, int numReplicas, int rank, DistributedSamplerOptions options = {});

  /// The shuffle's epoch (the permutation is seeded by seed + epoch).
  void setEpoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }
  /// This rank's indices for the current epoch, numSamples() of them.
  std::vector<int64_t> indices() const;
  /// ceil(size / numReplicas); floor with dropLast.
  int64_t numSamples() const { return numSamples_; }
  /// numSamples() * numReplicas: the padded (or cut) data set.
  int64_t totalSize() const { return numSamples_ * numReplicas_; }

 private:
  int64_t size_;
  int numReplicas_;
  int rank_;
  DistributedSamplerOptions options_;
  uint64_t epoch_ = 0;
  int64_t numSamples_;
};

}  // namespace kiln::data
