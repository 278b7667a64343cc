// data::DataLoader: batches of a data set, loaded ahead of the consumer by
// worker threads, as torch.utils.data.DataLoader (docs/data.md):
//
//   auto dataset = data::map(std::make_shared<data::TensorDataset>(
//                                std::vector<Tensor>{images, labels}), augment);
//   data::DataLoader loader(dataset, {.batchSize = 64, .shuffle = true, .numWorkers = 2,
//                                     .pinMemory = true, .seed = 42});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (data::Batch& batch : loader) step(batch.data(), batch.target());
//
// Each range-for is one epoch; the loader counts epochs (setEpoch to choose
// one, and where in it to start), and a shuffled epoch's order is seeded by
// seed + epoch.
//
// Note [Loader order does not depend on the workers]
// Batch i of an epoch holds the same examples, and is delivered i-th, for
// any numWorkers: the epoch's batches are fixed up front by the sampler
// (a function of seed and epoch), workers claim them in order, and the
// consumer takes them in order, waiting for batch i even when batch i+1 is
// ready. At most numWorkers * prefetchFactor batches are claimed beyond the
// one the consumer waits for. What a transform draws at random should come
// from workerInfo()->seed, which is a function of (seed, epoch, batch)
// too; kiln's default generator is shared by the threads and would make
// the draws depend on scheduling.
//
// Note [Stopping workers]
// An epoch ends when its iterator goes: at the end of the loop, at a break,
// or when the loader or iterator is destroyed mid-epoch. Then the epoch is
// cancelled: a worker waiting for room stops waiting, and a worker loading a
// batch stops before its next example (the flag is checked between
// examples, and a long transform may poll loadingCancelled()). Ending an
// epoch so takes at most about one example's load, never a whole batch
// and never a queue's worth. Threads are joined at the epoch's end, or at
// the loader's destruction with persistentWorkers.
//
// Note [Iterable datasets and workers]
// An IterableDataset is one stream, so it is read in order by one thread at
// a time: the worker that claimed batch i reads the stream's next
// batchSize examples once batch i-1's were read, then collates (and pins)
// them while the next worker reads. Batches are therefore the same for any
// numWorkers, and parallel workers speed up collation and pinning only;
// PyTorch instead runs a copy of the stream per worker and leaves the
// sharding to the data set (torch.utils.data.get_worker_info), which needs
// processes of their own. Work that should run in parallel belongs in a
// map-style Dataset (data::map).
#pragma once

#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>

#include "frontend/data/collate.h"
#include "frontend/data/dataset.h"
#include "frontend/data/example.h"
#include "frontend/data/sampler.h"

namespace kiln::data {

struct DataLoaderOptions {
  int64_t batchSize = 1;
  /// A RandomSampler seeded by seed + epoch; else SequentialSampler.
  bool shuffle = false;
  /// Threads that load batches; 0: the consumer loads each batch when it asks.
  int numWorkers = 0;
  /// Batches in pinned host memory, ready for Tensor::to(device, true).
  bool pinMemory = false;
  /// Batches each worker loads ahead (with numWorkers > 0).
  int prefetchFactor = 2;
  /// Keep the worker threads from one epoch to the next.
  bool persistentWorkers = false;
  /// Drop the last batch when it is short.
  bool dropLast = false;
  /// Seeds the shuffle (seed + epoch) and workerInfo()->seed.
  uint64_t seed = 0;
};

/// What a transform running in the loader may ask: which worker and batch it
/// loads, and a seed for its random draws that is a function of the
/// loader's seed, the epoch and the batch only.
struct WorkerInfo {
  int id = 0;  ///< 0..numWorkers-1; -1 when the consumer loads (numWorkers 0)
  int numWorkers = 0;
  uint64_t epoch = 0;
  int64_t batch = 0;  ///< the batch being loaded
  uint64_t seed = 0;  ///< splitmix of (seed, epoch, batch)
};

/// The loading going on in the calling thread, or nullptr outside a loader.
const WorkerInfo* workerInfo();
/// Whether the batch the calling thread loads is no longer wanted (its
/// epoch ended): a long transform may poll it and return early.
bool loadingCancelled();

namespace detail {
struct LoaderState;
class EpochRun;
}  // namespace detail

class DataLoader {
 public:
  /// Reads `dataset` with a SequentialSampler, or a RandomSampler with shuffle.
  explicit DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  /// Reads the indices of `sampler` (shuffle must be false: the sampler orders).
  DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
             DataLoaderOptions options = {});
  /// Reads a stream (shuffle must be false; Note [Iterable datasets and workers]).
  explicit DataLoader(std::shared_ptr<IterableDataset> dataset, DataLoaderOptions options = {});
  /// A data set passed by value (`DataLoader(TensorDataset({x, y}), {...})`),
  /// moved into a shared_ptr the loader owns.
  template <typename D>
  requires(
      std::derived_from<std::remove_cvref_t<D>, Dataset> ||
      std::derived_from<std::remove_cvref_t<D>, IterableDataset>) explicit DataLoader(D&& dataset,
                                                                                      DataLoaderOptions options = {})
      : DataLoader(asShared(std::forward<D>(dataset)), options) {}
  /// Ends the epoch running, if any (Note [Stopping workers]).
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  DataLoader(DataLoader&&) noexcept = default;
  DataLoader& operator=(DataLoader&&) noexcept;

  /// Replaces data::collate (the loader still pins what it returns with pinMemory).
  void setCollate(CollateFn collate);

  class Iterator;
  /// Starts an epoch (ending one still running) and returns its first batch.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  /// The epoch the next begin() reads; begin() moves it on by one. With
  /// startBatch > 0 that epoch starts at its batch startBatch and the
  /// batches before it are not loaded: resuming mid-epoch from a
  /// checkpoint, as torchdata's StatefulDataLoader does (batch i is still
  /// the epoch's batch i, and workerInfo()->batch says i). The epoch after
  /// it starts at 0. kiln::Error for startBatch past size(), and for an
  /// iterable data set, whose batches can only be read in order.
  void setEpoch(uint64_t epoch, int64_t startBatch = 0);
  uint64_t epoch() const;
  /// Batches per epoch; an error for an iterable data set, whose length is unknown.
  int64_t size() const;
  const DataLoaderOptions& options() const;

 private:
  template <typename D>
  static auto asShared(D&& dataset) {
    using T = std::remove_cvref_t<D>;
    if constexpr (std::derived_from<T, Dataset>)
      return std::shared_ptr<const Dataset>(std::make_shared<T>(std::forward<D>(dataset)));
    else
      return std::shared_ptr<IterableDataset>(std::make_shared<T>(std::forward<D>(dataset)));
  }
  std::shared_ptr<detail::LoaderState> state_;
};

/// An epoch's batches, in order (an input iterator). Destroying it ends the
/// epoch (Note [Stopping workers]).
class DataLoader::Iterator {
 public:
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;

  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  Batch& operator*() const;
  Batch* operator->() const { return &**this; }
  /// The next batch; rethrows a worker's exception at the batch it broke
  /// (a kiln::Error naming the worker and batch, with the worker's message).
  Iterator& operator++();
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const;

 private:
  friend class DataLoader;
  explicit Iterator(std::shared_ptr<detail::EpochRun> run);
  std::shared_ptr<detail::EpochRun> run_;
  std::unique_ptr<Batch> batch_;  ///< null at the end
};

}  // namespace kiln::data
