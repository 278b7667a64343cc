// CachingAllocator: one device's memory, cached the way PyTorch's
// CUDACachingAllocator caches it, for any driver that can hand out raw
// segments and events (a SegmentSource: the CUDA and OpenCL drivers).
//
// Asking a device for memory is slow and often synchronizes it, and a
// training loop asks for the same sizes every step; so freed blocks stay
// with the allocator and serve later requests. Requests round to 512 B;
// small ones (≤ 1 MiB) are carved from 2 MiB segments, 1-10 MiB ones from
// 20 MiB segments, larger ones get segments rounded to 2 MiB. A request
// takes the smallest cached block of its pool and stream that fits,
// splitting off the rest; a freed block merges with free neighbours.
// docs/allocator.md has the whole design and where it differs from PyTorch.
//
// Note [Blocks belong to a stream]
// A block is reused only by requests on the stream it was allocated on:
// work on that stream is ordered, so a new owner's kernels run after the
// old owner's. A block also used on other streams (recordStream) is held
// back when freed until an event recorded on each of those streams at free
// time has completed; events are polled at each allocate().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/alloc_conf.h"
#include "runtime/device.h"
#include "runtime/device_interface.h"

namespace kiln::runtime {

/// What a driver gives the caching allocator: raw segments of device memory
/// and events on its streams. Called with the allocator's lock held, so it
/// must not call back into the allocator.
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  /// A new segment of `bytes` bytes, or null when the device is out of
  /// memory (never throws for that; other failures may throw).
  virtual void* allocateSegment(size_t bytes) = 0;
  /// Gives a segment back. Work enqueued before on any stream may still use
  /// it; the source makes that safe, as cuMemFree (which waits for the
  /// device) and clReleaseMemObject (which defers the release until the
  /// commands using the buffer finish) do.
  virtual void freeSegment(void* handle) = 0;
  virtual EventHandle createEvent() = 0;
  virtual void destroyEvent(EventHandle event) = 0;
  /// The event completes when the work enqueued on `stream` so far has.
  virtual void recordEvent(EventHandle event, StreamHandle stream) = 0;
  /// Whether the event has completed.
  virtual bool queryEvent(EventHandle event) = 0;
  /// Waits for all work of the device.
  virtual void synchronize() = 0;
};


/// A device's caching allocator. Thread-safe (one mutex).
class CachingAllocator {
 public:
  /// `source` must outlive the allocator. kiln::Error when `conf` is out of
  /// range (AllocConf::validate).
  CachingAllocator(Device device, SegmentSource& source, AllocConf conf = AllocConf::fromEnvironment());
  /// Gives every segment and event back to the source, in use or not.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// At least `bytes` bytes for use on `stream`: a segment and an offset
  /// into it, unique among live allocations (a zero-byte request gets 512
  /// bytes). kiln::Error naming the device, the request and the memory in
  /// use when even an emptied cache cannot serve it; what was allocated
  /// before stays valid.
  DevicePtr allocate(size_t bytes, StreamHandle stream);
  /// Returns an allocation to the cache (null: nothing). InternalError for
  /// a pointer this allocator did not hand out.
  void free(DevicePtr ptr);
  /// Marks an allocation as used on `stream` too, like torch's
  /// Tensor.record_stream (Note [Blocks belong to a stream]).
  void recordStream(DevicePtr ptr, StreamHandle stream);

  /// Every statistic, as of now (docs/allocator.md).
  MemoryStats stats() const;
  /// Sets every ".peak" to its ".current".
  void resetPeakStats();
  /// Waits for the device, then gives every unused segment back.
  void emptyCache();
  /// A table of stats(), like torch.cuda.memory_summary().
  std::string summary() const;

  const AllocConf& conf() const { return conf_; }
  /// The size a request of `bytes` is rounded to (SIZE_MAX when no block
  /// can be that large).
  static size_t roundSize(size_t bytes, const AllocConf& conf);
  /// The segment a cache miss asks the source for, for a rounded size.
  static size_t segmentSize(size_t rounded);

 private:
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySize>;  // cached free blocks, by stream then size
  struct Stat {
    int64_t current = 0, peak = 0, allocated = 0, freed = 0;
    void increase(int64_t amount);
    void decrease(int64_t amount);
  };
  using StatArray = std::array<Stat, 3>;  // all, large_pool, small_pool
  struct Stats {
    StatArray allocation, segment, active, inactiveSplit;
    StatArray allocatedBytes, reservedBytes, activeBytes, inactiveSplitBytes, requestedBytes;
    Stat oversizeAllocations, oversizeSegments;
    int64_t numAllocRetries = 0, numOoms = 0, numSyncAllStreams = 0, numDeviceAlloc = 0, numDeviceFree = 0;
  };
  struct PendingFree {  // a freed block waiting for an event (Note [Blocks belong to a stream])
    EventHandle event;
    Block* block;
  };

  Pool& poolOf(const Block* block);
  void changeStat(StatArray& stat, bool small, int64_t amount);
  Block* takeCachedBlock(Pool& pool, size_t size, StreamHandle stream);
  Block* newSegment(size_t size, bool small, StreamHandle stream);
  DevicePtr handOut(Block* block, size_t size, size_t requested);
  void freeBlock(Block* block);
  void insertCached(Block* block);
  void processEvents();
  void synchronizeAndFreeEvents();
  void releaseSegment(Block* block);
  void releaseCachedSegments();
  void collectGarbage();
  EventHandle takeEvent();
  size_t reservedBytes() const { return static_cast<size_t>(stats_.reservedBytes[0].current); }  // [0]: all
  [[noreturn]] void outOfMemory(size_t bytes, size_t size, size_t segment);
  template <typename S, typename Fn>
  static void forEachStat(S& stats, Fn&& fn);

  Device device_;
  SegmentSource& source_;
  AllocConf conf_;
  mutable std::mutex mutex_;
  // Block ownership: every block is in exactly one of small_/large_ (free),
  // allocated_ (handed out) or pending_ (freed, waiting for events), and is
  // deleted when merged into a neighbour or when its segment is released.
  Pool small_, large_;
  std::map<std::pair<void*, size_t>, Block*> allocated_;  // by (segment, offset)
  std::deque<PendingFree> pending_;
  std::map<void*, size_t> segments_;     // every segment from the source, with its size
  std::vector<EventHandle> idleEvents_;  // made once, reused across frees
  uint64_t clock_ = 0;                   // counts blocks entering the cache: their age, for garbage collection
  Stats stats_;
};

}  // namespace kiln::runtime
