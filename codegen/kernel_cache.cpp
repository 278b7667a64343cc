// The in-memory kernel cache of codegen/kernel_cache.h.
#include "codegen/kernel_cache.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>
#include <unordered_set>

#include "runtime/log.h"
#include "runtime/profiler_events.h"

namespace kiln::codegen {

KernelCache& KernelCache::instance() {
  static auto* cache = new KernelCache();  // leaked: kernels may outlive statics
  return *cache;
}

std::shared_ptr<const CompiledKernel> KernelCache::get(const Kernel& kernel, Device device) {
  std::string key = device.str() + "|" + kernel.signature();
  profiler::RecordFunction range("cache", "kernel_cache_lookup");
  if (range.event()) [[unlikely]]
    range.event()->detail = kernel.name;
  {
    std::lock_guard lock(mutex_);
    if (auto it = kernels_.find(key); it != kernels_.end()) {
      if (range.event()) [[unlikely]]
        range.event()->name = "kernel_cache_hit";
      stats_.hits++;
      KILN_LOG_TO(cache, "kiln::cache: memory hit {} on {} (key {:016x})", kernel.name, device.str(), kernel.hash());
      return it->second;
    }
  }
  // Compile outside the lock; if two threads race, both compile and the
  // first one in wins (the compilers are themselves thread-safe).
  if (range.event()) [[unlikely]]
    range.event()->name = "kernel_cache_miss";
  auto compiled = std::make_shared<const CompiledKernel>(targetFor(device).compile(kernel, device));
  KILN_LOG_TO(cache, "kiln::cache: memory miss {} on {} (key {:016x}): {} in {:.3f} ms", kernel.name, device.str(),
              kernel.hash(), compiled->fromDiskCache ? "loaded from the disk cache" : "compiled", compiled->compileMs);
  std::lock_guard lock(mutex_);
  stats_.misses++;
  stats_.diskHits += compiled->fromDiskCache;
  stats_.compileMs += compiled->compileMs;
  return kernels_.emplace(std::move(key), compiled).first->second;
}

int compileThreads() {
  if (const char* env = std::getenv("KILN_COMPILE_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return std::clamp(static_cast<int>(hw), 1, 8);
}

// Note [Kernels compile in parallel]
// A compiled program's first call compiles all its kernels (13-46 for a
// training step), each one independent of the others, and compileGraph
// needs them all before the program runs. So compileGraph lowers every
// node first, then hands the kernels to getAll, which compiles the ones
// not in memory on compileThreads() threads (the calling thread one of
// them), each taking the next kernel: a program of n kernels on t threads
// takes about 1/t of their sum, or the slowest one. The log and the
// statistics are those of one get() per kernel. The targets compile
// concurrently: the CPU backend gives each thread its own TargetMachine
// and locks only to link (codegen/llvm_jit.cpp), NVRTC and OpenCL's
// compilers are thread-safe, and two threads that race for one kernel both
// compile it and the first in wins (get). Threads are made per getAll,
// not taken from runtime::ThreadPool: its workers run kernels, and a
// compile takes milliseconds, a thread's start microseconds.
std::vector<std::shared_ptr<const CompiledKernel>> KernelCache::getAll(const std::vector<const Kernel*>& kernels,
                                                                       Device device, int threads) {
  // The misses, each signature once (its first occurrence); everything
  // else is looked up after them, as a sequence of get() calls would.
  std::vector<size_t> todo;
  {
    std::unordered_set<std::string> seen;
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < kernels.size(); ++i) {
      std::string key = device.str() + "|" + kernels[i]->signature();
      if (!kernels_.count(key) && seen.insert(std::move(key)).second) todo.push_back(i);
    }
  }
  std::vector<std::shared_ptr<const CompiledKernel>> out(kernels.size());
  if (threads <= 0) threads = compileThreads();
  threads = std::min<int>(threads, static_cast<int>(todo.size()));
  // Each thread takes the next miss, this one too; a failure stops the
  // others from taking more.
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(static_cast<size_t>(std::max(threads, 1)));
  auto work = [&](int t) {
    try {
      for (size_t i; !failed.load() && (i = next.fetch_add(1)) < todo.size();)
        out[todo[i]] = get(*kernels[todo[i]], device);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(work, t);
  work(0);
  for (std::thread& h : helpers) h.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (size_t i = 0; i < kernels.size(); ++i)
    if (!out[i]) out[i] = get(*kernels[i], device);
  return out;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void KernelCache::clear() {
  std::lock_guard lock(mutex_);
  kernels_.clear();
}

}  // namespace kiln::codegen
