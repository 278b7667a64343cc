// The thread pool of runtime/thread_pool.h.
#include "runtime/thread_pool.h"

#include <cstdlib>
#include <string>

#include "runtime/error.h"

namespace kiln::runtime {

namespace {
thread_local bool tInsideWorker = false;

int defaultThreads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}
}  // namespace

ThreadPool& ThreadPool::instance() {
  // Leaked on purpose: kernels may still run during static destruction.
  static auto* pool = new ThreadPool(defaultThreads());
  return *pool;
}

ThreadPool::ThreadPool(int numThreads) {
  for (int i = 1; i < numThreads; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::runChunk(int index) {
  int64_t begin = static_cast<int64_t>(index) * chunk_;
  int64_t end = std::min(n_, begin + chunk_);
  if (begin < end) {
    try {
      (*fn_)(begin, end);
    } catch (...) {
      std::lock_guard lock(errorMutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::workerLoop(int index) {
  tInsideWorker = true;
  uint64_t seen = 0;
  for (;;) {
    // Spin a little: eager ops come back to back.
    for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen && !stop_; ++spin)
      std::this_thread::yield();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    runChunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = numThreads();
  if (tInsideWorker || threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::lock_guard submit(submitMutex_);
  int64_t perThread = (n + threads - 1) / threads;
  chunk_ = (perThread + grain - 1) / grain * grain;
  n_ = n;
  fn_ = &fn;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  {
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  tInsideWorker = true;  // a nested parallelFor from fn runs inline
  runChunk(0);
  tInsideWorker = false;
  while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace kiln::runtime
