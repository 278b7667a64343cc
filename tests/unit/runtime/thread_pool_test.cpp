// Unit tests for ThreadPool::parallelFor on a local pool of 3 threads: every
// index of [0, n) is run exactly once, ranges start at multiples of the grain,
// work is spread over the caller and both workers, small n runs inline on the
// caller, an exception thrown in any range reaches the caller after the other
// ranges finished and leaves the pool usable, nested calls run inline instead
// of deadlocking, and concurrent callers are served one after the other.
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace kiln::runtime {
namespace {

using Range = std::pair<int64_t, int64_t>;

// Runs parallelFor and records the ranges and the threads that ran them.
struct Recorder {
  std::mutex mutex;
  std::vector<Range> ranges;
  std::set<std::thread::id> threads;
  std::vector<std::atomic<int>> hits;

  explicit Recorder(int64_t n) : hits(static_cast<size_t>(n)) {}
  void operator()(int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard lock(mutex);
    ranges.emplace_back(begin, end);
    threads.insert(std::this_thread::get_id());
  }
};

// Fails the test (and exits, rather than hang the suite) if `fn` does not
// finish within a minute.
template <class Fn>
void withinAMinute(Fn fn) {
  auto done = std::async(std::launch::async, std::move(fn));
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "parallelFor deadlocked";
    std::_Exit(1);
  }
  done.get();
}

void expectPartition(Recorder& rec, int64_t n, int64_t grain) {
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(rec.hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  for (const auto& [begin, end] : rec.ranges) {
    EXPECT_LT(begin, end) << "empty range passed to fn";
    EXPECT_EQ(begin % grain, 0) << "range [" << begin << ", " << end << ") does not start at a multiple of " << grain;
    EXPECT_TRUE(end == n || end % grain == 0) << "range [" << begin << ", " << end << ")";
  }
}

TEST(ThreadPool, CountsTheCallerAsAThread) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.numThreads(), 3);
  ThreadPool single(1);
  EXPECT_EQ(single.numThreads(), 1);
}

TEST(ThreadPool, CoversEveryIndexOnceWithGrainAlignedRanges) {
  ThreadPool pool(3);
  for (auto [n, grain] : std::vector<Range>{
           {1000, 7}, {1000, 1}, {999, 64}, {10, 3}, {65, 64}, {100000, 16}, {4, 1}, {2, 1}, {1 << 20, 1024}}) {
    SCOPED_TRACE(testing::Message() << "n=" << n << " grain=" << grain);
    Recorder rec(n);
    pool.parallelFor(n, grain, std::ref(rec));
    expectPartition(rec, n, grain);
    EXPECT_LE(rec.ranges.size(), 3u) << "at most one range per thread";
  }
}

TEST(ThreadPool, ManyBackToBackCallsStayCorrect) {
  // Exercises the workers' spin/sleep hand-off between generations.
  ThreadPool pool(3);
  for (int iter = 0; iter < 500; ++iter) {
    const int64_t n = 50 + iter % 37;
    Recorder rec(n);
    pool.parallelFor(n, 4, std::ref(rec));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(rec.hits[static_cast<size_t>(i)].load(), 1) << iter << ":" << i;
    if (iter % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let workers sleep
  }
}

TEST(ThreadPool, SplitsWorkAcrossTheCallerAndTheWorkers) {
  ThreadPool pool(3);
  Recorder rec(3000);
  pool.parallelFor(3000, 10, std::ref(rec));
  EXPECT_EQ(rec.ranges.size(), 3u);
  EXPECT_EQ(rec.threads.size(), 3u) << "each of the 3 threads takes a range";
  EXPECT_TRUE(rec.threads.count(std::this_thread::get_id())) << "the caller works too";
}

TEST(ThreadPool, SmallNRunsInlineOnTheCaller) {
  ThreadPool pool(3);
  for (auto [n, grain] : std::vector<Range>{{5, 5}, {1, 1}, {3, 100}}) {
    Recorder rec(n);
    pool.parallelFor(n, grain, std::ref(rec));
    ASSERT_EQ(rec.ranges.size(), 1u);
    EXPECT_EQ(rec.ranges[0], Range(0, n));
    EXPECT_EQ(*rec.threads.begin(), std::this_thread::get_id());
  }
}

TEST(ThreadPool, EmptyAndNegativeNDoNothing) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  pool.parallelFor(-5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, NonPositiveGrainActsAsOne) {
  ThreadPool pool(3);
  Recorder rec(100);
  pool.parallelFor(100, 0, std::ref(rec));
  expectPartition(rec, 100, 1);
}

TEST(ThreadPool, OnePoolThreadRunsEverythingOnTheCaller) {
  ThreadPool pool(1);
  Recorder rec(1000);
  pool.parallelFor(1000, 1, std::ref(rec));
  ASSERT_EQ(rec.ranges.size(), 1u);
  EXPECT_EQ(rec.ranges[0], Range(0, 1000));
  EXPECT_EQ(*rec.threads.begin(), std::this_thread::get_id());
}

TEST(ThreadPool, ExceptionInAWorkerRangeReachesTheCaller) {
  ThreadPool pool(3);
  // With n = 300 and 3 threads the ranges are [0,100), [100,200), [200,300);
  // the caller runs the first, so the throwing one runs on a worker.
  std::atomic<int> finished{0};
  try {
    pool.parallelFor(300, 1, [&](int64_t begin, int64_t) {
      if (begin == 200) throw Error("range 200 failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      finished.fetch_add(1);
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "range 200 failed");
  }
  EXPECT_EQ(finished.load(), 2) << "the other ranges finished before the rethrow";

  // The pool still works, and the old error is not thrown again.
  Recorder rec(300);
  EXPECT_NO_THROW(pool.parallelFor(300, 1, std::ref(rec)));
  expectPartition(rec, 300, 1);
}

TEST(ThreadPool, ExceptionInTheCallersRangeReachesTheCaller) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallelFor(300, 1,
                                [&](int64_t begin, int64_t) {
                                  if (begin == 0) throw std::out_of_range("first");
                                }),
               std::out_of_range);
  Recorder rec(300);
  pool.parallelFor(300, 1, std::ref(rec));
  expectPartition(rec, 300, 1);
}

TEST(ThreadPool, OneOfSeveralExceptionsIsRethrown) {
  ThreadPool pool(3);
  try {
    pool.parallelFor(300, 1, [](int64_t begin, int64_t) { throw std::runtime_error(std::to_string(begin)); });
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what == "0" || what == "100" || what == "200") << what;
  }
}

TEST(ThreadPool, NestedParallelForRunsInlineWithoutDeadlock) {
  withinAMinute([] {
    ThreadPool pool(3);
    std::atomic<int64_t> inner{0};
    std::mutex mutex;
    std::vector<Range> innerRanges;
    pool.parallelFor(3000, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; i += 500) {
        pool.parallelFor(1000, 1, [&](int64_t b, int64_t e) {
          inner.fetch_add(e - b);
          std::lock_guard lock(mutex);
          innerRanges.emplace_back(b, e);
        });
      }
    });
    // 3000 / 500 = 6 nested calls of 1000 indices each, one whole range each.
    EXPECT_EQ(inner.load(), 6000);
    EXPECT_EQ(innerRanges.size(), 6u);
    for (const Range& r : innerRanges) EXPECT_EQ(r, Range(0, 1000));
  });
}

TEST(ThreadPool, ConcurrentCallersAreServedOneAfterTheOther) {
  withinAMinute([] {
    ThreadPool pool(3);
    constexpr int64_t n = 20000;
    Recorder a(n), b(n);
    std::thread other([&] {
      for (int k = 0; k < 50; ++k)
        pool.parallelFor(n / 50, 8, [&](int64_t s, int64_t e) { a(k * (n / 50) + s, k * (n / 50) + e); });
    });
    for (int k = 0; k < 50; ++k)
      pool.parallelFor(n / 50, 8, [&](int64_t s, int64_t e) { b(k * (n / 50) + s, k * (n / 50) + e); });
    other.join();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(a.hits[static_cast<size_t>(i)].load(), 1) << i;
      ASSERT_EQ(b.hits[static_cast<size_t>(i)].load(), 1) << i;
    }
  });
}

TEST(ThreadPool, DestroysCleanlyWhileWorkersSleepOrSpin) {
  withinAMinute([] {
    for (int k = 0; k < 20; ++k) {
      ThreadPool pool(3);
      Recorder rec(64);
      pool.parallelFor(64, 1, std::ref(rec));
      expectPartition(rec, 64, 1);
      if (k % 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

TEST(ThreadPool, GlobalInstanceIsOneAndUsable) {
  ThreadPool& pool = ThreadPool::instance();
  EXPECT_EQ(&pool, &ThreadPool::instance());
  EXPECT_GE(pool.numThreads(), 1);
  Recorder rec(5000);
  pool.parallelFor(5000, 32, std::ref(rec));
  expectPartition(rec, 5000, 32);
}

}  // namespace
}  // namespace kiln::runtime
