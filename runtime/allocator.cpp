// The caching host allocator of runtime/allocator.h.
#include "runtime/allocator.h"

#include <cstdlib>
#include <limits>

#include "runtime/error.h"
#include "runtime/profiler_events.h"

namespace kiln::runtime {

namespace {
constexpr size_t kSmallStep = 512;
constexpr size_t kLargeLimit = size_t(1) << 20;
constexpr size_t kLargeStep = size_t(2) << 20;
constexpr size_t kAlignment = 64;

size_t roundUp(size_t n, size_t step) { return (n + step - 1) / step * step; }
}  // namespace

size_t HostAllocator::roundSize(size_t bytes) {
  if (bytes == 0) bytes = 1;
  // No class holds a request this close to SIZE_MAX (a negative size cast to
  // size_t); rounding it up would wrap around to a tiny block.
  if (bytes > std::numeric_limits<size_t>::max() - kLargeStep) return std::numeric_limits<size_t>::max();
  return bytes < kLargeLimit ? roundUp(bytes, kSmallStep) : roundUp(bytes, kLargeStep);
}

HostAllocator& HostAllocator::instance() {
  // Leaked on purpose: buffers may be released during static destruction.
  static auto* allocator = new HostAllocator();
  return *allocator;
}

HostAllocator::~HostAllocator() { emptyCache(); }

void* HostAllocator::allocate(size_t bytes) {
  const size_t size = roundSize(bytes);
  std::lock_guard lock(mutex_);
  stats_.numAllocations++;
  void* ptr = nullptr;
  size_t got = size;
  // Best fit among cached blocks that waste at most a quarter of themselves.
  if (auto it = free_.lower_bound(size); it != free_.end() && it->first - size <= it->first / 4) {
    ptr = it->second;
    got = it->first;
    free_.erase(it);
    stats_.numCacheHits++;
  } else {
    ptr = std::aligned_alloc(kAlignment, size);
    if (!ptr && !free_.empty()) {
      // Give the cache back and retry once, like the CUDA caching allocator.
      for (auto& [s, p] : free_) {
        std::free(p);
        stats_.reservedBytes -= static_cast<int64_t>(s);
      }
      free_.clear();
      ptr = std::aligned_alloc(kAlignment, size);
    }
    if (!ptr)
      fail("out of memory: cpu allocator could not get {} bytes (requested {}); {} bytes allocated, {} "
           "reserved",
           size, bytes, stats_.allocatedBytes, stats_.reservedBytes);
    stats_.numOsAllocations++;
    stats_.reservedBytes += static_cast<int64_t>(size);
    stats_.peakReservedBytes = std::max(stats_.peakReservedBytes, stats_.reservedBytes);
  }
  live_.emplace(ptr, got);
  stats_.allocatedBytes += static_cast<int64_t>(got);
  stats_.peakAllocatedBytes = std::max(stats_.peakAllocatedBytes, stats_.allocatedBytes);
  if (profiler::flags() & profiler::kMemory) [[unlikely]]
    profiler::recordMemory("cpu", static_cast<int64_t>(got), stats_.allocatedBytes, stats_.reservedBytes);
  return ptr;
}

void HostAllocator::release(void* ptr) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  KILN_ASSERT(it != live_.end(), "release of a pointer the host allocator did not hand out");
  stats_.allocatedBytes -= static_cast<int64_t>(it->second);
  if (profiler::flags() & profiler::kMemory) [[unlikely]]
    profiler::recordMemory("cpu", -static_cast<int64_t>(it->second), stats_.allocatedBytes, stats_.reservedBytes);
  free_.emplace(it->second, ptr);
  live_.erase(it);
}

AllocatorStats HostAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void HostAllocator::resetPeakStats() {
  std::lock_guard lock(mutex_);
  stats_.peakAllocatedBytes = stats_.allocatedBytes;
  stats_.peakReservedBytes = stats_.reservedBytes;
}

void HostAllocator::emptyCache() {
  std::lock_guard lock(mutex_);
  for (auto& [size, ptr] : free_) {
    std::free(ptr);
    stats_.reservedBytes -= static_cast<int64_t>(size);
  }
  free_.clear();
}

std::string HostAllocator::memorySummary() const {
  auto s = stats();
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  return fmt::format(
      "cpu caching allocator\n"
      "  allocated: {:.1f} MiB (peak {:.1f} MiB)\n"
      "  reserved:  {:.1f} MiB (peak {:.1f} MiB)\n"
      "  allocations: {} ({} from the cache, {} from the OS)\n",
      mib(s.allocatedBytes), mib(s.peakAllocatedBytes), mib(s.reservedBytes), mib(s.peakReservedBytes),
      s.numAllocations, s.numCacheHits, s.numOsAllocations);
}

}  // namespace kiln::runtime
