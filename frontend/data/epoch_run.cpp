// WorkerPool and EpochRun (frontend/data/epoch_run.h): the loader's threads,
// its ordered delivery and its cancellation.
#include "frontend/data/epoch_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "runtime/error.h"

namespace kiln::data {

namespace {

struct Loading {
  WorkerInfo info;
  const std::atomic<bool>* cancelled = nullptr;
};
thread_local const Loading* tLoading = nullptr;

/// Sets what workerInfo() and loadingCancelled() answer for a scope.
class LoadingScope {
 public:
  explicit LoadingScope(const Loading* loading) : previous_(tLoading) { tLoading = loading; }
  ~LoadingScope() { tLoading = previous_; }
  LoadingScope(const LoadingScope&) = delete;
  LoadingScope& operator=(const LoadingScope&) = delete;

 private:
  const Loading* previous_;
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Thrown between examples once the run is cancelled; never leaves load().
struct Cancelled {};

}  // namespace

const WorkerInfo* workerInfo() { return tLoading ? &tLoading->info : nullptr; }

bool loadingCancelled() { return tLoading && tLoading->cancelled->load(std::memory_order_relaxed); }

namespace detail {

WorkerPool::WorkerPool(int numWorkers) {
  threads_.reserve(static_cast<size_t>(numWorkers));
  for (int i = 0; i < numWorkers; ++i) threads_.emplace_back([this, i] { loop(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex);
    stop_ = true;
  }
  workCv.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::attachLocked(EpochRun* run) {
  current_ = run;
  workCv.notify_all();
}

void WorkerPool::loop(int id) {
  std::unique_lock lock(mutex);
  for (;;) {
    workCv.wait(lock, [&] { return stop_ || (current_ && current_->claimableLocked()); });
    if (stop_) return;
    EpochRun* run = current_;
    const int64_t batch = run->claimLocked();
    lock.unlock();
    EpochRun::Slot slot = run->load(batch, id);
    lock.lock();
    // The run stays attached until its inFlight count is back to zero
    // (EpochRun::finish waits for that), so `run` is alive here.
    run->storeLocked(batch, std::move(slot));
    doneCv.notify_all();
  }
}

EpochRun::EpochRun(std::shared_ptr<const LoaderSource> source, uint64_t epoch, std::shared_ptr<WorkerPool> pool,
                   int64_t startBatch)
    : source_(std::move(source)), epoch_(epoch), pool_(std::move(pool)) {
  const DataLoaderOptions& o = source_->options;
  if (source_->dataset) {
    batches_ = BatchSampler(source_->sampler, o.batchSize, o.dropLast).batches(epoch);
    // Batches before startBatch count as claimed and delivered: nothing
    // loads them, and the rest keep their numbers.
    claimed_ = delivered_ = std::min<int64_t>(startBatch, static_cast<int64_t>(batches_.size()));
  } else {
    source_->iterable->reset();
  }
  if (pool_) {
    std::lock_guard lock(pool_->mutex);
    pool_->attachLocked(this);
  }
}

EpochRun::~EpochRun() {
  finish();
  pool_.reset();  // joins the threads of a pool only this epoch used
}

void EpochRun::finish() {
  cancelled_.store(true);
  {
    std::lock_guard lock(readMutex_);  // a reader waiting for its turn must see the flag
  }
  readCv_.notify_all();
  if (!pool_) {
    finished_ = true;
    return;
  }
  std::unique_lock lock(pool_->mutex);
  if (finished_) return;
  finished_ = true;
  pool_->attachLocked(nullptr);
  pool_->doneCv.wait(lock, [&] { return inFlight_ == 0; });
  results_.clear();
}

bool EpochRun::claimableLocked() const {
  if (cancelled_.load(std::memory_order_relaxed)) return false;
  const DataLoaderOptions& o = source_->options;
  if (claimed_ >= delivered_ + static_cast<int64_t>(o.numWorkers) * o.prefetchFactor) return false;
  return source_->dataset ? claimed_ < static_cast<int64_t>(batches_.size()) : !streamEnded_;
}

int64_t EpochRun::claimLocked() {
  ++inFlight_;
  return claimed_++;
}

void EpochRun::storeLocked(int64_t batch, Slot slot) {
  --inFlight_;
  if (slot.streamEnded) streamEnded_ = true;
  if (!cancelled_.load()) results_.emplace(batch, std::move(slot));
}

std::vector<Example> EpochRun::readStream(int64_t batch, bool& ended) {
  std::unique_lock lock(readMutex_);
  readCv_.wait(lock, [&] { return readTurn_ == batch || cancelled_.load(); });
  if (cancelled_.load()) throw Cancelled{};
  std::vector<Example> examples;
  const auto size = static_cast<size_t>(source_->options.batchSize);
  // The turn passes on however this ends (an exception included).
  struct PassTurn {
    EpochRun* run;
    ~PassTurn() {
      ++run->readTurn_;
      run->readCv_.notify_all();
    }
  } passTurn{this};
  while (!readEnded_ && examples.size() < size) {
    if (cancelled_.load(std::memory_order_relaxed)) throw Cancelled{};
    std::optional<Example> e = source_->iterable->next();
    if (!e) {
      readEnded_ = true;
      break;
    }
    examples.push_back(std::move(*e));
  }
  ended = readEnded_;
  return examples;
}

EpochRun::Slot EpochRun::load(int64_t batch, int worker) {
  const DataLoaderOptions& o = source_->options;
  Loading loading;
  loading.info = {worker, o.numWorkers, epoch_, batch,
                  splitmix64(o.seed ^ splitmix64(epoch_ ^ splitmix64(static_cast<uint64_t>(batch))))};
  loading.cancelled = &cancelled_;
  LoadingScope scope(&loading);
  Slot slot;
  slot.worker = worker;
  try {
    std::vector<Example> examples;
    if (source_->dataset) {
      const std::vector<int64_t>& indices = batches_[static_cast<size_t>(batch)];
      examples.reserve(indices.size());
      for (int64_t index : indices) {
        if (cancelled_.load(std::memory_order_relaxed)) throw Cancelled{};
        examples.push_back(source_->dataset->get(index));
      }
    } else {
      examples = readStream(batch, slot.streamEnded);
      if (examples.empty() || (o.dropLast && examples.size() < static_cast<size_t>(o.batchSize))) {
        slot.end = true;
        return slot;
      }
    }
    if (cancelled_.load(std::memory_order_relaxed)) throw Cancelled{};
    Batch b = source_->collate ? source_->collate(examples) : collate(examples, o.pinMemory);
    if (o.pinMemory)
      for (Tensor& t : b.tensors)
        if (t.defined() && t.device().isCpu() && !t.isTraced()) t = t.pinMemory();
    slot.batch = std::move(b);
  } catch (const Cancelled&) {
    slot.end = true;
  } catch (const std::exception& e) {
    slot.error = e.what();
  } catch (...) {
    slot.error = "an exception that is not a std::exception";
  }
  return slot;
}

std::optional<Batch> EpochRun::next() {
  Slot slot;
  int64_t batch = 0;
  if (!pool_) {
    if (finished_) return std::nullopt;
    batch = delivered_++;
    if (source_->dataset && batch >= static_cast<int64_t>(batches_.size())) {
      finished_ = true;
      return std::nullopt;
    }
    slot = load(batch, -1);
  } else {
    std::unique_lock lock(pool_->mutex);
    if (finished_) return std::nullopt;
    batch = delivered_;
    const bool mapStyle = source_->dataset != nullptr;
    if (mapStyle && batch >= static_cast<int64_t>(batches_.size())) {
      lock.unlock();
      finish();
      return std::nullopt;
    }
    pool_->doneCv.wait(lock, [&] { return results_.count(batch) || (streamEnded_ && batch >= claimed_); });
    auto it = results_.find(batch);
    if (it == results_.end()) {
      slot.end = true;
    } else {
      slot = std::move(it->second);
      results_.erase(it);
    }
    ++delivered_;
    pool_->workCv.notify_all();
  }
  if (slot.end || !slot.error.empty()) {
    finish();
    if (slot.end) return std::nullopt;
    if (slot.worker < 0)
      throw Error(fmt::format("DataLoader: loading batch {} of epoch {} failed: {}", batch, epoch_, slot.error));
    throw Error(fmt::format("DataLoader: worker {} failed loading batch {} of epoch {}: {}", slot.worker, batch, epoch_,
                            slot.error));
  }
  return std::move(slot.batch);
}

}  // namespace detail
}  // namespace kiln::data
