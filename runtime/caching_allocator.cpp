// The caching allocator of runtime/caching_allocator.h: pools, splitting and
// merging, stream-use events, the out-of-memory path and the statistics.
#include "runtime/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/profiler_events.h"

namespace kiln::runtime {

namespace {
constexpr size_t kMinBlock = 512;                    // every size is a multiple of it
constexpr size_t kSmallSize = size_t(1) << 20;       // the largest request of the small pool
constexpr size_t kSmallSegment = size_t(2) << 20;    // what small blocks are carved from
constexpr size_t kLargeSegment = size_t(20) << 20;   // what 1-10 MiB blocks are carved from
constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // from here on, a segment of its own
constexpr size_t kRoundLarge = size_t(2) << 20;      // ... rounded to 2 MiB
constexpr size_t kNoSize = std::numeric_limits<size_t>::max();

// The multiple of `step` at or above `n`; kNoSize when that overflows (a
// negative size cast to size_t must not wrap around to a small block).
size_t roundUp(size_t n, size_t step) {
  const size_t steps = n / step + (n % step != 0);
  return steps > kNoSize / step ? kNoSize : steps * step;
}

enum : size_t { kAll, kLargePool, kSmallPool };

std::string formatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double a = std::abs(b);
  if (a < 1024) return fmt::format("{} B", bytes);
  if (a < 1024.0 * 1024) return fmt::format("{:.2f} KiB", b / 1024);
  if (a < 1024.0 * 1024 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}
}  // namespace

struct CachingAllocator::Block {
  void* segment = nullptr;  // the source's handle
  size_t offset = 0;        // into the segment
  size_t size = 0;
  StreamHandle stream;  // the allocation stream (Note [Blocks belong to a stream])
  bool small = false;   // which pool
  bool allocated = false;
  size_t requested = 0;                    // what the user asked for, while allocated or pending
  std::vector<StreamHandle> streamUses{};  // other streams it was used on (recordStream)
  int eventCount = 0;                      // events to wait for before it is free
  Block* prev = nullptr;                   // neighbours in the segment, when split
  Block* next = nullptr;
  uint64_t cachedAt = 0;  // clock_ when it entered the cache

  bool isSplit() const { return prev || next; }
  bool isFree() const { return !allocated && eventCount == 0; }
};

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  std::less<void*> less;
  if (a->stream.native != b->stream.native) return less(a->stream.native, b->stream.native);
  if (a->size != b->size) return a->size < b->size;
  if (a->segment != b->segment) return less(a->segment, b->segment);
  return a->offset < b->offset;
}

void CachingAllocator::Stat::increase(int64_t amount) {
  current += amount;
  peak = std::max(peak, current);
  allocated += amount;
}

void CachingAllocator::Stat::decrease(int64_t amount) {
  current -= amount;
  KILN_ASSERT(current >= 0, "caching allocator statistic below zero");
  freed += amount;
}

// Every change counts in "all" and in the block's pool.
void CachingAllocator::changeStat(StatArray& stat, bool small, int64_t amount) {
  for (size_t i : {size_t(kAll), small ? size_t(kSmallPool) : size_t(kLargePool)}) {
    if (amount >= 0)
      stat[i].increase(amount);
    else
      stat[i].decrease(-amount);
  }
}

CachingAllocator::Pool& CachingAllocator::poolOf(const Block* block) { return block->small ? small_ : large_; }

size_t CachingAllocator::roundSize(size_t bytes, const AllocConf& conf) {
  if (bytes <= kMinBlock) return kMinBlock;
  const size_t divisions = static_cast<size_t>(conf.roundupPower2Divisions);
  // Above divisions * 512 B each step is at least 512 B, so sizes stay
  // multiples of 512 and offsets of split blocks stay aligned.
  if (divisions > 1 && bytes > kMinBlock * divisions) {
    const size_t floor = std::bit_floor(bytes);
    return floor == bytes ? bytes : roundUp(bytes, floor / divisions);
  }
  return roundUp(bytes, kMinBlock);
}

size_t CachingAllocator::segmentSize(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return roundUp(rounded, kRoundLarge);
}

CachingAllocator::CachingAllocator(Device device, SegmentSource& source, AllocConf conf)
    : device_(device), source_(source), conf_(conf) {
  conf_.validate();
}

CachingAllocator::~CachingAllocator() {
  // No synchronize: freeSegment and destroyEvent are safe with work in
  // flight (SegmentSource). A throwing source must not end the process here.
  std::set<Block*> blocks(small_.begin(), small_.end());
  blocks.insert(large_.begin(), large_.end());
  for (auto& [key, block] : allocated_) blocks.insert(block);
  for (auto& pending : pending_) {
    blocks.insert(pending.block);
    idleEvents_.push_back(pending.event);
  }
  for (auto& [handle, size] : segments_) {
    try {
      source_.freeSegment(handle);
    } catch (...) {
    }
  }
  for (EventHandle event : idleEvents_) {
    try {
      source_.destroyEvent(event);
    } catch (...) {
    }
  }
  for (Block* block : blocks) delete block;
}

DevicePtr CachingAllocator::allocate(size_t bytes, StreamHandle stream) {
  std::lock_guard lock(mutex_);
  processEvents();
  const size_t size = roundSize(bytes, conf_);
  const bool small = size <= kSmallSize;
  const size_t segment = segmentSize(size);
  Block* block = takeCachedBlock(small ? small_ : large_, size, stream);
  if (!block) {
    collectGarbage();
    block = newSegment(segment, small, stream);
  }
  if (!block) {
    // Give back everything cached (after the device has finished with the
    // blocks waiting for events) and ask once more.
    synchronizeAndFreeEvents();
    releaseCachedSegments();
    stats_.numAllocRetries++;
    block = newSegment(segment, small, stream);
  }
  if (!block) outOfMemory(bytes, size, segment);
  return handOut(block, size, bytes);
}

// PyTorch's best fit: the smallest cached block of the stream that holds
// `size`, unless max_split_size makes it the wrong kind of block.
CachingAllocator::Block* CachingAllocator::takeCachedBlock(Pool& pool, size_t size, StreamHandle stream) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // An oversize block is not carved up for a request that could be split
  // from a normal one, and serves an oversize request only if it wastes
  // less than a large segment.
  if (size < conf_.maxSplitSize && block->size >= conf_.maxSplitSize) return nullptr;
  if (size >= conf_.maxSplitSize && block->size - size >= kLargeSegment) return nullptr;
  pool.erase(it);
  return block;
}

CachingAllocator::Block* CachingAllocator::newSegment(size_t size, bool small, StreamHandle stream) {
  if (size == kNoSize) return nullptr;  // no device has that much
  if (conf_.memoryLimit && (reservedBytes() >= conf_.memoryLimit || size > conf_.memoryLimit - reservedBytes()))
    return nullptr;
  void* handle = source_.allocateSegment(size);
  if (!handle) return nullptr;
  KILN_ASSERT(!segments_.contains(handle), "{}: the segment source handed out a live segment again", device_.str());
  segments_.emplace(handle, size);
  auto* block = new Block{.segment = handle, .size = size, .stream = stream, .small = small};
  changeStat(stats_.segment, small, 1);
  changeStat(stats_.reservedBytes, small, static_cast<int64_t>(size));
  if (size >= conf_.maxSplitSize) stats_.oversizeSegments.increase(1);
  stats_.numDeviceAlloc++;
  return block;
}

// Splits `block` (no longer in a pool) if the rest is worth keeping, and
// hands out its front.
DevicePtr CachingAllocator::handOut(Block* block, size_t size, size_t requested) {
  const bool small = block->small;
  const size_t remaining = block->size - size;
  // Small blocks split down to 512 B; large ones only when the rest is more
  // than a small request could use, and never when oversize
  // (max_split_size), so that big blocks stay whole.
  const bool split = small ? remaining >= kMinBlock : block->size < conf_.maxSplitSize && remaining > kSmallSize;
  if (split) {
    const bool alreadySplit = block->isSplit();
    auto* rest = new Block{.segment = block->segment,
                           .offset = block->offset + size,
                           .size = remaining,
                           .stream = block->stream,
                           .small = small,
                           .prev = block,
                           .next = block->next};
    if (block->next) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    insertCached(rest);
    if (alreadySplit) {
      // An inactive split block shrinks by what is handed out.
      changeStat(stats_.inactiveSplitBytes, small, -static_cast<int64_t>(size));
    } else {
      changeStat(stats_.inactiveSplit, small, 1);
      changeStat(stats_.inactiveSplitBytes, small, static_cast<int64_t>(remaining));
    }
  } else if (block->isSplit()) {
    changeStat(stats_.inactiveSplit, small, -1);
    changeStat(stats_.inactiveSplitBytes, small, -static_cast<int64_t>(block->size));
  }
  block->allocated = true;
  block->requested = requested;
  allocated_.emplace(std::pair(block->segment, block->offset), block);
  const auto bytes = static_cast<int64_t>(block->size);
  changeStat(stats_.allocation, small, 1);
  changeStat(stats_.allocatedBytes, small, bytes);
  changeStat(stats_.active, small, 1);
  changeStat(stats_.activeBytes, small, bytes);
  changeStat(stats_.requestedBytes, small, static_cast<int64_t>(requested));
  if (block->size >= conf_.maxSplitSize) stats_.oversizeAllocations.increase(1);
  if (profiler::flags() & profiler::kMemory) [[unlikely]]
    profiler::recordMemory(device_.str(), bytes, stats_.allocatedBytes[0].current, stats_.reservedBytes[0].current);
  return {block->segment, block->offset};
}

void CachingAllocator::free(DevicePtr ptr) {
  if (!ptr.handle) return;
  std::lock_guard lock(mutex_);
  auto it = allocated_.find(std::pair(ptr.handle, ptr.offset));
  KILN_ASSERT(it != allocated_.end(), "{}: free of memory the caching allocator did not hand out (offset {})",
              device_.str(), ptr.offset);
  Block* block = it->second;
  // Record the events first: if the source throws, the block stays allocated.
  std::vector<EventHandle> events;
  try {
    for (StreamHandle use : block->streamUses) {
      events.push_back(takeEvent());
      source_.recordEvent(events.back(), use);
    }
  } catch (...) {
    idleEvents_.insert(idleEvents_.end(), events.begin(), events.end());
    throw;
  }
  allocated_.erase(it);
  block->allocated = false;
  block->streamUses.clear();
  // Allocated bytes drop now; active bytes when the block is free for reuse.
  changeStat(stats_.allocation, block->small, -1);
  changeStat(stats_.allocatedBytes, block->small, -static_cast<int64_t>(block->size));
  if (block->size >= conf_.maxSplitSize) stats_.oversizeAllocations.decrease(1);
  if (profiler::flags() & profiler::kMemory) [[unlikely]]
    profiler::recordMemory(device_.str(), -static_cast<int64_t>(block->size), stats_.allocatedBytes[0].current,
                           stats_.reservedBytes[0].current);
  if (events.empty()) {
    freeBlock(block);
    return;
  }
  block->eventCount = static_cast<int>(events.size());
  for (EventHandle event : events) pending_.push_back({event, block});
}

void CachingAllocator::recordStream(DevicePtr ptr, StreamHandle stream) {
  std::lock_guard lock(mutex_);
  auto it = allocated_.find(std::pair(ptr.handle, ptr.offset));
  KILN_ASSERT(it != allocated_.end(), "{}: recordStream of memory the caching allocator did not hand out",
              device_.str());
  Block* block = it->second;
  if (stream == block->stream) return;  // its own stream orders its reuse already
  if (std::find(block->streamUses.begin(), block->streamUses.end(), stream) == block->streamUses.end())
    block->streamUses.push_back(stream);
}

// A block that has become free (freed, or its events done) merges with its
// free neighbours, so that a segment whose blocks are all free is one block
// again, and enters its pool.
void CachingAllocator::freeBlock(Block* block) {
  const bool small = block->small;
  const auto size = static_cast<int64_t>(block->size);
  const auto requested = static_cast<int64_t>(block->requested);
  Pool& pool = poolOf(block);
  int64_t splitBlocks = 0, splitBytes = 0;  // the net change of inactive split blocks
  for (Block* neighbour : {block->prev, block->next}) {
    if (!neighbour || !neighbour->isFree()) continue;
    pool.erase(neighbour);
    if (neighbour == block->prev) {
      block->offset = neighbour->offset;
      block->prev = neighbour->prev;
      if (block->prev) block->prev->next = block;
    } else {
      block->next = neighbour->next;
      if (block->next) block->next->prev = block;
    }
    block->size += neighbour->size;
    splitBlocks--;
    splitBytes -= static_cast<int64_t>(neighbour->size);
    delete neighbour;
  }
  if (block->isSplit()) {
    splitBlocks++;
    splitBytes += static_cast<int64_t>(block->size);
  }
  if (splitBlocks) changeStat(stats_.inactiveSplit, small, splitBlocks);
  if (splitBytes) changeStat(stats_.inactiveSplitBytes, small, splitBytes);
  changeStat(stats_.active, small, -1);
  changeStat(stats_.activeBytes, small, -size);
  changeStat(stats_.requestedBytes, small, -requested);
  block->requested = 0;
  insertCached(block);
}

void CachingAllocator::insertCached(Block* block) {
  block->cachedAt = ++clock_;
  poolOf(block).insert(block);
}

void CachingAllocator::processEvents() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!source_.queryEvent(it->event)) {
      ++it;
      continue;
    }
    idleEvents_.push_back(it->event);
    Block* block = it->block;
    it = pending_.erase(it);
    if (--block->eventCount == 0) freeBlock(block);
  }
}

void CachingAllocator::synchronizeAndFreeEvents() {
  stats_.numSyncAllStreams++;
  source_.synchronize();
  for (auto& [event, block] : pending_) {
    idleEvents_.push_back(event);
    if (--block->eventCount == 0) freeBlock(block);
  }
  pending_.clear();
}

EventHandle CachingAllocator::takeEvent() {
  if (idleEvents_.empty()) return source_.createEvent();
  EventHandle event = idleEvents_.back();
  idleEvents_.pop_back();
  return event;
}

// Gives back the segment of `block`, a whole free segment in its pool.
void CachingAllocator::releaseSegment(Block* block) {
  KILN_ASSERT(block->isFree() && !block->isSplit(), "release of a segment in use");
  source_.freeSegment(block->segment);  // first: if it throws, nothing has changed
  poolOf(block).erase(block);
  segments_.erase(block->segment);
  changeStat(stats_.segment, block->small, -1);
  changeStat(stats_.reservedBytes, block->small, -static_cast<int64_t>(block->size));
  if (block->size >= conf_.maxSplitSize) stats_.oversizeSegments.decrease(1);
  stats_.numDeviceFree++;
  delete block;
}

void CachingAllocator::releaseCachedSegments() {
  for (Pool* pool : {&small_, &large_}) {
    std::vector<Block*> whole;
    for (Block* block : *pool)
      if (!block->isSplit()) whole.push_back(block);
    for (Block* block : whole) releaseSegment(block);
  }
}

// Above garbage_collection_threshold of the limit, frees unused segments,
// oldest in the cache first, until the reserved bytes are back under it.
void CachingAllocator::collectGarbage() {
  if (conf_.garbageCollectionThreshold <= 0 || conf_.memoryLimit == 0) return;
  const auto threshold = static_cast<size_t>(conf_.garbageCollectionThreshold * static_cast<double>(conf_.memoryLimit));
  if (reservedBytes() <= threshold) return;
  std::vector<Block*> whole;
  for (Pool* pool : {&small_, &large_})
    for (Block* block : *pool)
      if (!block->isSplit()) whole.push_back(block);
  std::sort(whole.begin(), whole.end(), [](const Block* a, const Block* b) { return a->cachedAt < b->cachedAt; });
  for (Block* block : whole) {
    if (reservedBytes() <= threshold) break;
    releaseSegment(block);
  }
}

void CachingAllocator::outOfMemory(size_t bytes, size_t size, size_t segment) {
  stats_.numOoms++;
  const int64_t allocated = stats_.allocatedBytes[kAll].current;
  const int64_t reserved = stats_.reservedBytes[kAll].current;
  // Whose refusal it was: kiln's limit, or the device.
  const size_t cap = conf_.memoryLimit;
  const bool overLimit = cap && (static_cast<size_t>(reserved) >= cap || segment > cap - static_cast<size_t>(reserved));
  const std::string limit =
      !cap        ? std::string("none (the device is full)")
      : overLimit ? fmt::format("{} (reached)", formatBytes(static_cast<int64_t>(cap)))
                  : fmt::format("{} (not reached: the device is full)", formatBytes(static_cast<int64_t>(cap)));
  const std::string wanted =
      segment == kNoSize ? std::string("more than the address space") : formatBytes(static_cast<int64_t>(segment));
  // What is still cached now is split off segments in use: fragmentation.
  fail(
      "{}: out of memory: a request of {} bytes (rounded to {}) needs a new segment of {}; {} allocated, {} "
      "reserved, {} free in the cache, limit {}{}",
      device_.str(), bytes, size, wanted, formatBytes(allocated), formatBytes(reserved),
      formatBytes(reserved - allocated), limit,
      reserved > allocated ? "; the free memory is fragmented (KILN_ALLOC_CONF=max_split_size_mb:N may help)" : "");
}

// Calls fn(name, stat) for each Stat of `stats` (const or not), names
// without the ".current"-like suffix.
template <typename S, typename Fn>
void CachingAllocator::forEachStat(S& stats, Fn&& fn) {
  using Array = std::conditional_t<std::is_const_v<S>, const StatArray, StatArray>;
  const std::pair<const char*, Array*> arrays[] = {
      {"active", &stats.active},
      {"active_bytes", &stats.activeBytes},
      {"allocated_bytes", &stats.allocatedBytes},
      {"allocation", &stats.allocation},
      {"inactive_split", &stats.inactiveSplit},
      {"inactive_split_bytes", &stats.inactiveSplitBytes},
      {"requested_bytes", &stats.requestedBytes},
      {"reserved_bytes", &stats.reservedBytes},
      {"segment", &stats.segment},
  };
  for (auto& [name, array] : arrays) {
    fn(std::string(name) + ".all", (*array)[kAll]);
    fn(std::string(name) + ".large_pool", (*array)[kLargePool]);
    fn(std::string(name) + ".small_pool", (*array)[kSmallPool]);
  }
  fn(std::string("oversize_allocations"), stats.oversizeAllocations);
  fn(std::string("oversize_segments"), stats.oversizeSegments);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  MemoryStats result;
  forEachStat(stats_, [&](const std::string& name, const Stat& stat) {
    result[name + ".current"] = stat.current;
    result[name + ".peak"] = stat.peak;
    result[name + ".allocated"] = stat.allocated;
    result[name + ".freed"] = stat.freed;
  });
  result["num_alloc_retries"] = stats_.numAllocRetries;
  result["num_ooms"] = stats_.numOoms;
  result["num_sync_all_streams"] = stats_.numSyncAllStreams;
  result["num_device_alloc"] = stats_.numDeviceAlloc;
  result["num_device_free"] = stats_.numDeviceFree;
  return result;
}

void CachingAllocator::resetPeakStats() {
  std::lock_guard lock(mutex_);
  forEachStat(stats_, [](const std::string&, Stat& stat) { stat.peak = stat.current; });
}

std::string CachingAllocator::summary() const {
  std::lock_guard lock(mutex_);
  std::string out = fmt::format(
      "{} caching allocator: {} out of memory, {} allocation retries, {} synchronizations, {} segments "
      "allocated, {} freed\n",
      device_.str(), stats_.numOoms, stats_.numAllocRetries, stats_.numSyncAllStreams, stats_.numDeviceAlloc,
      stats_.numDeviceFree);
  out += fmt::format("{:<28}{:>12}{:>12}{:>12}{:>12}\n", "", "current", "peak", "allocated", "freed");
  auto row = [&](std::string_view label, const Stat& stat, bool bytes) {
    auto cell = [&](int64_t v) { return bytes ? formatBytes(v) : std::to_string(v); };
    out += fmt::format("{:<28}{:>12}{:>12}{:>12}{:>12}\n", label, cell(stat.current), cell(stat.peak),
                       cell(stat.allocated), cell(stat.freed));
  };
  auto rows = [&](std::string_view label, const StatArray& array, bool bytes) {
    row(label, array[kAll], bytes);
    row("  from large pool", array[kLargePool], bytes);
    row("  from small pool", array[kSmallPool], bytes);
  };
  rows("allocated memory", stats_.allocatedBytes, true);
  rows("active memory", stats_.activeBytes, true);
  rows("requested memory", stats_.requestedBytes, true);
  rows("reserved memory", stats_.reservedBytes, true);
  rows("non-releasable memory", stats_.inactiveSplitBytes, true);
  rows("allocations", stats_.allocation, false);
  rows("active allocations", stats_.active, false);
  rows("segments", stats_.segment, false);
  rows("non-releasable allocations", stats_.inactiveSplit, false);
  row("oversize allocations", stats_.oversizeAllocations, false);
  row("oversize segments", stats_.oversizeSegments, false);
  return out;
}

void CachingAllocator::emptyCache() {
  std::lock_guard lock(mutex_);
  synchronizeAndFreeEvents();
  releaseCachedSegments();
}

}  // namespace kiln::runtime
