// The machinery behind data::DataLoader (internal): a WorkerPool of
// threads, and the EpochRun they load the batches of, in the order of
// Note [Loader order does not depend on the workers] and stopped as
// Note [Stopping workers] says (frontend/data/data_loader.h).
//
// Locking: a pool's `mutex` guards its current run and, for that run, the
// claim counter, the delivered counter, the finished results and inFlight.
// Workers load without it. An iterable data set's stream has a lock of its
// own (readMutex), taken by one loading worker at a time in batch order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "frontend/data/data_loader.h"

namespace kiln::data::detail {

/// What a loader reads and how; shared by the loader and its epochs.
struct LoaderSource {
  std::shared_ptr<const Dataset> dataset;     ///< map-style, or
  std::shared_ptr<IterableDataset> iterable;  ///< a stream
  std::shared_ptr<const Sampler> sampler;     ///< map-style only
  DataLoaderOptions options;
  CollateFn collate;  ///< empty: data::collate
};

class EpochRun;

/// numWorkers threads that load the batches of the run attached to the pool.
class WorkerPool {
 public:
  explicit WorkerPool(int numWorkers);
  /// Stops and joins the threads (no run may be attached).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  /// Makes `run` the run the workers load (mutex held), or none.
  void attachLocked(EpochRun* run);

  std::mutex mutex;
  std::condition_variable workCv;  ///< workers wait for something to claim
  std::condition_variable doneCv;  ///< the consumer waits for a result

 private:
  void loop(int id);
  EpochRun* current_ = nullptr;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// One epoch: its batches, the results the workers have finished, and the
/// consumer's place.
class EpochRun {
 public:
  /// With `pool` null the consumer loads each batch itself (numWorkers 0).
  /// A map-style epoch begins at batch `startBatch` (DataLoader::setEpoch).
  EpochRun(std::shared_ptr<const LoaderSource> source, uint64_t epoch, std::shared_ptr<WorkerPool> pool,
           int64_t startBatch = 0);
  /// finish(), then lets go of the pool (joining it if this run owned it).
  ~EpochRun();
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  /// The next batch, in order; nullopt at the end of the epoch. Rethrows a
  /// loading error as a kiln::Error naming the worker and batch.
  std::optional<Batch> next();
  /// Cancels the epoch and waits until no worker loads one of its batches
  /// (Note [Stopping workers]); idempotent.
  void finish();

  // The workers' side; the *Locked ones with the pool's mutex held.
  bool claimableLocked() const;
  int64_t claimLocked();
  struct Slot;
  Slot load(int64_t batch, int worker);
  void storeLocked(int64_t batch, Slot slot);

  struct Slot {
    std::optional<Batch> batch;
    bool end = false;  ///< no batch: the stream ended (or the run was cancelled)
    bool streamEnded = false;
    std::string error;  ///< what the load threw
    int worker = -1;
  };

 private:
  std::vector<Example> readStream(int64_t batch, bool& ended);
  Slot fail(int64_t batch, const Slot& slot);

  std::shared_ptr<const LoaderSource> source_;
  uint64_t epoch_;
  std::shared_ptr<WorkerPool> pool_;
  std::vector<std::vector<int64_t>> batches_;  ///< map-style: every batch's indices
  std::atomic<bool> cancelled_{false};

  // Under the pool's mutex (or the consumer's alone without a pool).
  int64_t claimed_ = 0;    ///< batches claimed so far (the next claim's index)
  int64_t delivered_ = 0;  ///< batches handed to the consumer so far
  int inFlight_ = 0;
  bool streamEnded_ = false;
  bool finished_ = false;
  std::map<int64_t, Slot> results_;

  // The stream (iterable data sets): batch readTurn_ reads next.
  std::mutex readMutex_;
  std::condition_variable readCv_;
  int64_t readTurn_ = 0;
  bool readEnded_ = false;
};

/// What DataLoader holds.
struct LoaderState {
  std::shared_ptr<LoaderSource> source;
  uint64_t epoch = 0;
  int64_t startBatch = 0;  ///< where the next epoch begins (setEpoch)
  std::shared_ptr<WorkerPool> persistentPool;  ///< with persistentWorkers, made at the first epoch
  std::weak_ptr<EpochRun> running;             ///< the epoch begun last
};

}  // namespace kiln::data::detail
