// The thread pool that splits kernel work across the CPU cores.
//
// parallelFor(n, grain, fn) cuts [0, n) into one contiguous range per thread,
// each a multiple of `grain` (kernels pass a grain that covers whole cache
// lines, so two threads never write the same line), and runs them on the
// pool's workers and the calling thread. Workers spin briefly before they
// sleep, so back-to-back eager kernels do not pay a wake-up each. A
// parallelFor called from inside a worker runs inline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

class ThreadPool {
 public:
  /// The process-wide pool: KILN_NUM_THREADS threads, else one per core.
  static ThreadPool& instance();

  explicit ThreadPool(int numThreads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Threads that share work, the caller included.
  int numThreads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs fn(begin, end) over a partition of [0, n); ranges are multiples of
  /// `grain` except the last. Small n runs inline on the caller. The first
  /// exception thrown by fn is rethrown here after every range has finished.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void workerLoop(int index);
  void runChunk(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::mutex submitMutex_;  // one parallelFor at a time
  // The job being run, valid while pending_ > 0.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::exception_ptr error_;
  std::mutex errorMutex_;
  std::atomic<bool> stop_{false};
};

}  // namespace kiln::runtime
