// The pinned host allocator (runtime/pinned_memory.h).
#include "runtime/pinned_memory.h"

#include <sys/mman.h>

#include <cstdlib>

#include "runtime/error.h"

namespace kiln::runtime {

namespace {
constexpr size_t kPage = 4096;
size_t roundPages(size_t bytes) { return std::max<size_t>((bytes + kPage - 1) / kPage * kPage, kPage); }
}  // namespace

PinnedAllocator& PinnedAllocator::instance() {
  static auto* allocator = new PinnedAllocator();  // leaked: tensors may be freed during static destruction
  return *allocator;
}

PinnedAllocator::~PinnedAllocator() { emptyCache(); }

bool PinnedAllocator::usesDone(Block& b) {
  if (!waitForUses_) return true;
  for (auto it = b.uses.begin(); it != b.uses.end();) {
    DeviceInterface& driver = deviceInterface(it->device);
    if (!driver.queryEvent(it->event)) return false;
    driver.destroyEvent(it->event);
    it = b.uses.erase(it);
  }
  return true;
}

std::map<char*, PinnedAllocator::Block>::iterator PinnedAllocator::find(const void* ptr) {
  auto* p = static_cast<char*>(const_cast<void*>(ptr));
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return blocks_.end();
  --it;
  return p < it->first + it->second.size ? it : blocks_.end();
}

void* PinnedAllocator::allocate(size_t bytes) {
  const size_t size = roundPages(bytes);
  std::lock_guard lock(mutex_);
  stats_.numAllocations++;
  // Best fit among released blocks whose uses are done, wasting at most a
  // quarter of the block (as the host allocator).
  std::map<char*, Block>::iterator best = blocks_.end();
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    Block& b = it->second;
    if (b.live || b.size < size || b.size - size > b.size / 4) continue;
    if (best != blocks_.end() && best->second.size <= b.size) continue;
    if (!usesDone(b)) {
      stats_.numDeferredReuses++;
      continue;
    }
    best = it;
  }
  if (best != blocks_.end()) {
    best->second.live = true;
    stats_.numCacheHits++;
    stats_.allocatedBytes += static_cast<int64_t>(best->second.size);
    return best->first;
  }
  void* memory = std::aligned_alloc(kPage, size);
  KILN_CHECK(memory, "pinMemory: out of host memory: {} bytes asked, {} pinned bytes held", bytes,
             stats_.reservedBytes);
  (void)::mlock(memory, size);  // best effort (RLIMIT_MEMLOCK): Note [Pinned memory]
  blocks_.emplace(static_cast<char*>(memory), Block{size, true, {}});
  stats_.allocatedBytes += static_cast<int64_t>(size);
  stats_.reservedBytes += static_cast<int64_t>(size);
  return memory;
}

void PinnedAllocator::release(void* ptr) {
  std::lock_guard lock(mutex_);
  auto it = blocks_.find(static_cast<char*>(ptr));
  KILN_ASSERT(it != blocks_.end() && it->second.live, "release of memory the pinned allocator did not hand out");
  it->second.live = false;
  stats_.allocatedBytes -= static_cast<int64_t>(it->second.size);
}

bool PinnedAllocator::isPinned(const void* ptr) const {
  std::lock_guard lock(mutex_);
  return const_cast<PinnedAllocator*>(this)->find(ptr) != blocks_.end();
}

void PinnedAllocator::recordUse(const void* ptr, Device device, StreamHandle stream) {
  DeviceInterface& driver = deviceInterface(device);
  EventHandle event = driver.createEvent(false);
  driver.recordEvent(event, stream);
  std::lock_guard lock(mutex_);
  auto it = find(ptr);
  KILN_ASSERT(it != blocks_.end(), "recordUse of memory that is not pinned");
  it->second.uses.push_back({device, event});
}

PinnedStats PinnedAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void PinnedAllocator::emptyCache() {
  std::lock_guard lock(mutex_);
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (it->second.live || !usesDone(it->second)) {
      ++it;
      continue;
    }
    ::munlock(it->first, it->second.size);
    std::free(it->first);
    stats_.reservedBytes -= static_cast<int64_t>(it->second.size);
    it = blocks_.erase(it);
  }
}

void PinnedAllocator::setWaitForUses(bool wait) {
  std::lock_guard lock(mutex_);
  waitForUses_ = wait;
}

}  // namespace kiln::runtime
