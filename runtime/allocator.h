// The caching host allocator: the CPU driver's memory (runtime/cpu_device.cpp).
//
// Freed blocks go back to a cache instead of to the OS, so that a loop that
// allocates the same sizes every step (eager ops, training steps) never pays
// for malloc or for page faults after its first iteration (DESIGN.md §7).
// Requests are rounded to size classes: multiples of 512 B below 1 MiB,
// multiples of 2 MiB above; a cached block is reused for a request of the
// same class, or for a smaller one when it wastes at most a quarter of itself.
// Splitting and merging of blocks and per-stream reuse come with the CUDA
// allocator, which will share this design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/allocator_stats.h"

namespace kiln::runtime {

class HostAllocator {
 public:
  /// The process-wide allocator for CPU memory.
  static HostAllocator& instance();

  /// Returns 64-byte aligned memory of at least `bytes` bytes (a zero-byte
  /// request gets a valid, unique pointer). Throws kiln::Error when the OS
  /// refuses, saying what was asked, allocated and reserved.
  void* allocate(size_t bytes);
  /// Returns a block obtained from allocate() to the cache.
  void release(void* ptr);

  AllocatorStats stats() const;
  void resetPeakStats();
  /// Gives every cached (free) block back to the OS.
  void emptyCache();
  /// A human summary of stats(), like torch.cuda.memory_summary().
  std::string memorySummary() const;

  /// The size class a request of `bytes` is rounded to.
  static size_t roundSize(size_t bytes);

  HostAllocator() = default;
  ~HostAllocator();
  HostAllocator(const HostAllocator&) = delete;
  HostAllocator& operator=(const HostAllocator&) = delete;

 private:
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;   // cached blocks by size
  std::map<void*, size_t> live_;        // handed-out blocks and their sizes
  AllocatorStats stats_;
};


}  // namespace kiln::runtime
