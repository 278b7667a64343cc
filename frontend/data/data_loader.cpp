// data::DataLoader (frontend/data/data_loader.h): options checks, epochs and
// the iterator; the threads and the ordering are in epoch_run.cpp.
#include "frontend/data/data_loader.h"

#include <utility>

#include "frontend/data/epoch_run.h"
#include "runtime/error.h"

namespace kiln::data {

namespace {

void checkOptions(const DataLoaderOptions& o) {
  KILN_CHECK(o.batchSize >= 1, "DataLoader: batchSize must be at least 1, got {}", o.batchSize);
  KILN_CHECK(o.numWorkers >= 0, "DataLoader: numWorkers must not be negative, got {}", o.numWorkers);
  KILN_CHECK(o.prefetchFactor >= 1, "DataLoader: prefetchFactor must be at least 1, got {}", o.prefetchFactor);
  KILN_CHECK(!o.persistentWorkers || o.numWorkers > 0, "DataLoader: persistentWorkers needs numWorkers > 0");
}

std::shared_ptr<detail::LoaderState> makeState(detail::LoaderSource source) {
  checkOptions(source.options);
  auto state = std::make_shared<detail::LoaderState>();
  state->source = std::make_shared<detail::LoaderSource>(std::move(source));
  return state;
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options) {
  KILN_CHECK(dataset != nullptr, "DataLoader: a null data set");
  std::shared_ptr<const Sampler> sampler;
  if (options.shuffle)
    sampler = std::make_shared<RandomSampler>(dataset->size(), options.seed);
  else
    sampler = std::make_shared<SequentialSampler>(dataset->size());
  state_ = makeState({std::move(dataset), nullptr, std::move(sampler), options, {}});
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
                       DataLoaderOptions options) {
  KILN_CHECK(dataset != nullptr, "DataLoader: a null data set");
  KILN_CHECK(sampler != nullptr, "DataLoader: a null sampler");
  KILN_CHECK(!options.shuffle, "DataLoader: shuffle with a sampler of one's own (the sampler sets the order)");
  state_ = makeState({std::move(dataset), nullptr, std::move(sampler), options, {}});
}

DataLoader::DataLoader(std::shared_ptr<IterableDataset> dataset, DataLoaderOptions options) {
  KILN_CHECK(dataset != nullptr, "DataLoader: a null data set");
  KILN_CHECK(!options.shuffle, "DataLoader: shuffle with an iterable data set (a stream is read in its order)");
  state_ = makeState({nullptr, std::move(dataset), nullptr, options, {}});
}

DataLoader::~DataLoader() {
  if (!state_) return;  // moved from
  if (auto run = state_->running.lock()) run->finish();
}

DataLoader& DataLoader::operator=(DataLoader&& other) noexcept {
  if (this != &other) {
    if (state_)
      if (auto run = state_->running.lock()) run->finish();
    state_ = std::move(other.state_);
  }
  return *this;
}

void DataLoader::setCollate(CollateFn collate) {
  // A new source: an epoch already running keeps the one it began with.
  auto source = std::make_shared<detail::LoaderSource>(*state_->source);
  source->collate = std::move(collate);
  state_->source = std::move(source);
}

namespace {
/// The batches of epoch `epoch` of a map-style source.
int64_t batchCount(const detail::LoaderSource& s, uint64_t epoch) {
  const int64_t n = static_cast<int64_t>(s.sampler->indices(epoch).size());
  const int64_t b = s.options.batchSize;
  return s.options.dropLast ? n / b : (n + b - 1) / b;
}
}  // namespace

DataLoader::Iterator DataLoader::begin() {
  // One epoch at a time: the workers (and an iterable's stream) are shared.
  if (auto previous = state_->running.lock()) previous->finish();
  const DataLoaderOptions& o = state_->source->options;
  std::shared_ptr<detail::WorkerPool> pool;
  if (o.numWorkers > 0) {
    if (o.persistentWorkers) {
      if (!state_->persistentPool) state_->persistentPool = std::make_shared<detail::WorkerPool>(o.numWorkers);
      pool = state_->persistentPool;
    } else {
      pool = std::make_shared<detail::WorkerPool>(o.numWorkers);
    }
  }
  auto run = std::make_shared<detail::EpochRun>(state_->source, state_->epoch++, std::move(pool),
                                                std::exchange(state_->startBatch, 0));
  state_->running = run;
  return Iterator(std::move(run));
}

void DataLoader::setEpoch(uint64_t epoch, int64_t startBatch) {
  if (startBatch != 0) {
    KILN_CHECK(state_->source->dataset != nullptr,
               "DataLoader::setEpoch: an iterable data set cannot start at batch {}: its batches are read in order",
               startBatch);
    const int64_t batches = batchCount(*state_->source, epoch);
    KILN_CHECK(startBatch >= 0 && startBatch <= batches,
               "DataLoader::setEpoch: start batch {} of epoch {}, which has {} batches", startBatch, epoch, batches);
  }
  state_->epoch = epoch;
  state_->startBatch = startBatch;
}

uint64_t DataLoader::epoch() const { return state_->epoch; }

int64_t DataLoader::size() const {
  KILN_CHECK(state_->source->dataset != nullptr,
             "DataLoader::size: an iterable data set has no known number of batches");
  return batchCount(*state_->source, state_->epoch);
}

const DataLoaderOptions& DataLoader::options() const { return state_->source->options; }

DataLoader::Iterator::Iterator(std::shared_ptr<detail::EpochRun> run) : run_(std::move(run)) {
  if (std::optional<Batch> b = run_->next()) batch_ = std::make_unique<Batch>(std::move(*b));
}

DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

Batch& DataLoader::Iterator::operator*() const {
  KILN_CHECK(batch_ != nullptr, "DataLoader: dereferencing the end of an epoch");
  return *batch_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  KILN_CHECK(batch_ != nullptr, "DataLoader: incrementing past the end of an epoch");
  batch_.reset();
  if (std::optional<Batch> b = run_->next()) batch_ = std::make_unique<Batch>(std::move(*b));
  return *this;
}

bool DataLoader::Iterator::operator==(std::default_sentinel_t) const { return batch_ == nullptr; }

}  // namespace kiln::data
