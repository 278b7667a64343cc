// data::DataLoader: order and content independent of the workers, epochs,
// dropLast, errors from workers, prompt shutdown, persistent workers and
// iterable data sets (frontend/data/data_loader.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>

#include "frontend/kiln.h"
#include "tests/unit/frontend/data_test_util.h"

namespace kiln::data {
namespace {

using namespace std::chrono_literals;
using testing::labelsOf;
using testing::NumberDataset;
using testing::secondsSince;

/// Every batch's labels and data (with a per-batch random offset drawn from
/// workerInfo()->seed) for two epochs of a shuffled loader.
struct Epochs {
  std::vector<std::vector<int64_t>> labels;
  std::vector<std::vector<float>> data;
};

Epochs twoEpochs(int numWorkers) {
  // Sleeps that differ by example make later batches finish first at times.
  auto base = std::make_shared<NumberDataset>(
      23, [](int64_t i) { std::this_thread::sleep_for(std::chrono::microseconds(200 * ((i * 7) % 5))); });
  auto noisy = map(base, [](Example e) {
    const WorkerInfo* info = workerInfo();
    if (!info) throw std::runtime_error("no worker info inside the loader");
    e.tensors[0] = add(e.tensors[0], static_cast<double>(info->seed % 1000));
    return e;
  });
  DataLoader loader(noisy, {.batchSize = 4, .shuffle = true, .numWorkers = numWorkers, .seed = 1234});
  Epochs out;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (Batch& b : loader) {
      out.labels.push_back(b.target().toVector<int64_t>());
      out.data.push_back(b.data().toVector());
    }
  return out;
}

TEST(DataLoader, SameBatchesForAnyNumberOfWorkers) {
  const Epochs reference = twoEpochs(0);
  ASSERT_EQ(reference.labels.size(), 12u);  // 6 batches (the last of 3) per epoch
  EXPECT_EQ(reference.labels[5].size(), 3u);
  for (int workers : {1, 2, 3}) {
    const Epochs e = twoEpochs(workers);
    EXPECT_EQ(e.labels, reference.labels) << workers << " workers";
    EXPECT_EQ(e.data, reference.data) << workers << " workers";
  }
}

TEST(DataLoader, ASlowFirstBatchIsStillDeliveredFirst) {
  // Batch 0 takes 60 ms, the others nothing: the second worker finishes
  // batches 1, 2, ... first, and they wait for it.
  auto dataset = std::make_shared<NumberDataset>(6, [](int64_t i) {
    if (i == 0) std::this_thread::sleep_for(60ms);
  });
  DataLoader loader(dataset, {.batchSize = 1, .numWorkers = 2, .prefetchFactor = 4});
  EXPECT_EQ(labelsOf(loader), (std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {3}, {4}, {5}}));
}

TEST(DataLoader, PrefetchIsBoundedByWorkersTimesPrefetchFactor) {
  std::atomic<int64_t> highest{-1};
  auto dataset = std::make_shared<NumberDataset>(100, [&](int64_t i) {
    int64_t seen = highest.load();
    while (i > seen && !highest.compare_exchange_weak(seen, i)) {
    }
  });
  DataLoader loader(dataset, {.batchSize = 1, .numWorkers = 2, .prefetchFactor = 2});
  auto it = loader.begin();  // batch 0 delivered; 2 x 2 batches may be claimed beyond it
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(highest.load(), 4);
  ++it;
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(highest.load(), 5) << "one more once the consumer took one";
}

TEST(DataLoader, EachEpochShufflesDifferentlyAndReproducibly) {
  auto dataset = std::make_shared<NumberDataset>(16);
  DataLoader loader(dataset, {.batchSize = 16, .shuffle = true, .numWorkers = 2, .seed = 7});
  EXPECT_EQ(loader.epoch(), 0u);
  const auto first = labelsOf(loader);
  const auto second = labelsOf(loader);
  EXPECT_EQ(loader.epoch(), 2u);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(first, second);
  for (auto labels : {first[0], second[0]}) {
    std::sort(labels.begin(), labels.end());
    std::vector<int64_t> all(16);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(labels, all) << "an epoch reads every example once";
  }
  loader.setEpoch(0);
  EXPECT_EQ(labelsOf(loader), first);
  DataLoader otherSeed(dataset, {.batchSize = 16, .shuffle = true, .seed = 8});
  EXPECT_NE(labelsOf(otherSeed), first);
}

TEST(DataLoader, WithoutShuffleReadsInOrder) {
  DataLoader loader(std::make_shared<NumberDataset>(5), {.batchSize = 2, .numWorkers = 2});
  EXPECT_EQ(labelsOf(loader), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
  int batches = 0;
  for (Batch& b : loader) {
    EXPECT_EQ(b.data().dim(), 2);
    EXPECT_EQ(b.data().size(1), 2);
    ++batches;
  }
  EXPECT_EQ(batches, 3) << "a second epoch";
}

TEST(DataLoader, DropLast) {
  auto dataset = std::make_shared<NumberDataset>(10);
  for (int workers : {0, 2}) {
    DataLoader keep(dataset, {.batchSize = 4, .numWorkers = workers});
    DataLoader drop(dataset, {.batchSize = 4, .numWorkers = workers, .dropLast = true});
    EXPECT_EQ(keep.size(), 3);
    EXPECT_EQ(drop.size(), 2);
    EXPECT_EQ(labelsOf(keep), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
    EXPECT_EQ(labelsOf(drop), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  }
}

TEST(DataLoader, AWorkersExceptionReachesTheConsumerAtItsBatch) {
  auto dataset = std::make_shared<NumberDataset>(20, [](int64_t i) {
    if (i == 13) throw std::runtime_error("sample 13 is corrupt");
  });
  for (int workers : {0, 1, 2}) {
    DataLoader loader(dataset, {.batchSize = 4, .numWorkers = workers});
    std::vector<int64_t> seen;
    std::string message;
    try {
      for (Batch& b : loader) seen.push_back(b.target().toVector<int64_t>()[0]);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 4, 8})) << workers << " workers: the batches before the bad one arrive";
    EXPECT_NE(message.find("sample 13 is corrupt"), std::string::npos) << message;
    EXPECT_NE(message.find("batch 3"), std::string::npos) << message;
    if (workers > 0) {
      EXPECT_NE(message.find("worker"), std::string::npos) << message;
    }
    // The loader still works: the next epoch fails at the same place.
    seen.clear();
    EXPECT_THROW(for (Batch& b : loader) seen.push_back(b.target().toVector<int64_t>()[0]), Error);
    EXPECT_EQ(seen.size(), 3u);
  }
}

TEST(DataLoader, BreakingOutOfASlowEpochReturnsPromptly) {
  // A batch takes 8 x 40 ms = 320 ms to load; with cancellation between
  // examples, ending the epoch waits for at most one example per worker.
  auto dataset = std::make_shared<NumberDataset>(64, [](int64_t) { std::this_thread::sleep_for(40ms); });
  DataLoader loader(dataset, {.batchSize = 8, .numWorkers = 2, .prefetchFactor = 2});
  std::chrono::steady_clock::time_point broke;
  for (Batch& b : loader) {
    EXPECT_EQ(b.data().size(0), 8);
    broke = std::chrono::steady_clock::now();
    break;
  }
  EXPECT_LT(secondsSince(broke), 0.2) << "the iterator's destruction waited for whole batches";
}

TEST(DataLoader, DestroyingTheLoaderMidEpochStopsATransformThatPollsCancellation) {
  std::atomic<int> started{0};
  auto dataset = std::make_shared<NumberDataset>(8, [&](int64_t i) {
    if (i == 0) return;
    ++started;
    // Would block for 30 s; polls the loader's cancellation instead.
    for (int ms = 0; ms < 30000 && !loadingCancelled(); ++ms) std::this_thread::sleep_for(1ms);
  });
  std::chrono::steady_clock::time_point destroying;
  {
    auto loader = std::make_unique<DataLoader>(dataset, DataLoaderOptions{.batchSize = 1, .numWorkers = 2});
    auto it = loader->begin();
    EXPECT_EQ((*it).target().item<int64_t>(), 0);
    while (started.load() < 2) std::this_thread::sleep_for(1ms);
    destroying = std::chrono::steady_clock::now();
    loader.reset();                              // cancels the epoch
    EXPECT_TRUE(++it == std::default_sentinel);  // which then has ended
  }
  EXPECT_LT(secondsSince(destroying), 0.5);
}

TEST(DataLoader, WorkersWaitingForRoomDoNotBlockShutdown) {
  auto dataset = std::make_shared<NumberDataset>(1000);
  const auto start = std::chrono::steady_clock::now();
  {
    DataLoader loader(dataset, {.batchSize = 2, .numWorkers = 3, .prefetchFactor = 1});
    auto it = loader.begin();
    std::this_thread::sleep_for(20ms);  // the workers fill the window and wait
    EXPECT_FALSE(it == std::default_sentinel);
  }
  EXPECT_LT(secondsSince(start), 0.5);
}

TEST(DataLoader, PersistentWorkersKeepTheirThreadsAcrossEpochs) {
  for (bool persistent : {false, true}) {
    auto dataset = std::make_shared<NumberDataset>(12);
    DataLoader loader(dataset, {.batchSize = 3, .shuffle = true, .numWorkers = 2, .persistentWorkers = persistent});
    DataLoader reference(dataset, {.batchSize = 3, .shuffle = true});
    for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(labelsOf(loader), labelsOf(reference)) << epoch;
    // The reference's consumer plus at most the two workers with
    // persistence; without, each epoch loads on at least one fresh thread.
    if (persistent)
      EXPECT_LE(dataset->threadCount(), 3);
    else
      EXPECT_GE(dataset->threadCount(), 4);
  }
}

TEST(DataLoader, ASamplerOfOnesOwnOrDistributed) {
  auto dataset = std::make_shared<NumberDataset>(10);
  auto sampler = std::make_shared<DistributedSamplerView>(DistributedSampler(10, 3, 1, {.shuffle = false}));
  DataLoader loader(dataset, sampler, {.batchSize = 2, .numWorkers = 1});
  EXPECT_EQ(labelsOf(loader), (std::vector<std::vector<int64_t>>{{1, 4}, {7, 0}}));
  EXPECT_THROW((void)DataLoader(dataset, sampler, {.shuffle = true}), Error);
}

TEST(DataLoader, TakesADatasetByValueAndMoves) {
  const Tensor x = arange(0, 8, 1, DType::f32, Device::cpu()).view({4, 2});
  const Tensor y = fromVector(std::vector<int64_t>{0, 1, 2, 3}, {4}, Device::cpu());
  DataLoader loader(TensorDataset({x, y}), {.batchSize = 2, .numWorkers = 1});
  DataLoader moved = std::move(loader);
  EXPECT_EQ(labelsOf(moved), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  std::vector<DataLoader> several;
  several.push_back(DataLoader(std::make_shared<NumberDataset>(3), {.batchSize = 3}));
  EXPECT_EQ(labelsOf(several[0]), (std::vector<std::vector<int64_t>>{{0, 1, 2}}));
}

TEST(DataLoader, BadOptionsAreErrors) {
  auto dataset = std::make_shared<NumberDataset>(4);
  try {
    DataLoader loader(dataset, {.batchSize = 0});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "DataLoader: batchSize must be at least 1, got 0");
  }
  EXPECT_THROW((void)DataLoader(dataset, {.numWorkers = -1}), Error);
  EXPECT_THROW((void)DataLoader(dataset, {.prefetchFactor = 0}), Error);
  EXPECT_THROW((void)DataLoader(dataset, {.persistentWorkers = true}), Error);
}

/// 0..size-1 as a stream; counts its resets.
class Counting : public IterableDataset {
 public:
  explicit Counting(int64_t size) : size_(size) {}
  void reset() override {
    at_ = 0;
    ++resets;
  }
  std::optional<Example> next() override {
    if (at_ == size_) return std::nullopt;
    const int64_t i = at_++;
    return Example(fromVector({static_cast<float>(i)}, {1}, Device::cpu()),
                   fromVector(std::vector<int64_t>{i}, {}, Device::cpu()));
  }
  int resets = 0;

 private:
  int64_t size_;
  int64_t at_ = 0;
};

TEST(DataLoader, AnEpochStartedMidwayLoadsOnlyTheRestWithTheirBatchNumbers) {
  // Which examples were loaded, and the batch number each transform saw.
  std::mutex mutex;
  std::vector<int64_t> loaded;
  auto dataset = std::make_shared<NumberDataset>(20, [&](int64_t i) {
    std::lock_guard lock(mutex);
    loaded.push_back(i);
  });
  auto numbered = map(dataset, [](Example e) {
    e.tensors.push_back(fromVector(std::vector<int64_t>{workerInfo()->batch}, {}, Device::cpu()));
    return e;
  });
  for (int workers : {0, 2}) {
    DataLoader loader(numbered, {.batchSize = 3, .shuffle = true, .numWorkers = workers, .seed = 5});
    loader.setEpoch(4);
    const auto whole = labelsOf(loader);  // epoch 4 from its start: 7 batches, the last of 2
    ASSERT_EQ(whole.size(), 7u);
    loaded.clear();
    loader.setEpoch(4, 5);
    std::vector<std::vector<int64_t>> rest;
    std::vector<int64_t> numbers;
    for (Batch& b : loader) {
      rest.push_back(b.target().toVector<int64_t>());
      numbers.push_back(b.tensors[2].toVector<int64_t>()[0]);
    }
    EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(whole.begin() + 5, whole.end())) << workers << " workers";
    EXPECT_EQ(numbers, (std::vector<int64_t>{5, 6})) << "batches keep their numbers in the epoch";
    std::vector<int64_t> expected;
    for (const auto& batch : rest) expected.insert(expected.end(), batch.begin(), batch.end());
    std::sort(loaded.begin(), loaded.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(loaded, expected) << "the skipped batches are not loaded (" << workers << " workers)";
    EXPECT_EQ(loader.epoch(), 5u);
    EXPECT_EQ(labelsOf(loader).size(), 7u) << "the next epoch starts at its first batch";
    loader.setEpoch(4, 7);
    EXPECT_TRUE(labelsOf(loader).empty()) << "starting at the end reads nothing";
  }
  DataLoader loader(dataset, {.batchSize = 3});
  loader.setEpoch(1, 2);
  EXPECT_THROW(
      {
        try {
          loader.setEpoch(3, 8);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "DataLoader::setEpoch: start batch 8 of epoch 3, which has 7 batches");
          throw;
        }
      },
      Error);
  EXPECT_EQ(loader.epoch(), 1u) << "a refused setEpoch changes nothing";
  EXPECT_EQ(labelsOf(loader).front(), (std::vector<int64_t>{6, 7, 8})) << "and keeps the start it had";
  EXPECT_THROW(loader.setEpoch(0, -1), Error);
  DataLoader stream(std::make_shared<Counting>(10), {.batchSize = 2});
  EXPECT_THROW(stream.setEpoch(0, 1), Error);
}

TEST(DataLoader, IterableDatasetsAreReadInOrderByAnyNumberOfWorkers) {
  for (int workers : {0, 1, 2, 3}) {
    auto stream = std::make_shared<Counting>(10);
    DataLoader loader(stream, {.batchSize = 3, .numWorkers = workers});
    const std::vector<std::vector<int64_t>> all{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
    EXPECT_EQ(labelsOf(loader), all) << workers << " workers";
    EXPECT_EQ(labelsOf(loader), all) << workers << " workers, second epoch";
    EXPECT_EQ(stream->resets, 2);
    DataLoader drop(stream, {.batchSize = 3, .numWorkers = workers, .dropLast = true});
    EXPECT_EQ(labelsOf(drop).size(), 3u);
    DataLoader exact(std::make_shared<Counting>(9), {.batchSize = 3, .numWorkers = workers});
    EXPECT_EQ(labelsOf(exact).size(), 3u);
  }
  EXPECT_THROW((void)DataLoader(std::make_shared<Counting>(3)).size(), Error);
}

}  // namespace
}  // namespace kiln::data
