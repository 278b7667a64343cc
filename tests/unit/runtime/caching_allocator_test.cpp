// Unit tests for the device caching allocator (runtime/caching_allocator.h)
// and its configuration (runtime/alloc_conf.h), on a fake SegmentSource
// whose segments are opaque numbers (never host memory), which counts what
// it is asked for, refuses what passes its byte limit, and whose events
// complete only when the test says so. They cover rounding, pools and
// segment sizes, reuse on the allocation stream only, recordStream's
// events, splitting and merging, max_split_size, the out-of-memory path
// (retry after emptying the cache, then an error that leaves earlier
// allocations intact), garbage collection, the statistics and emptyCache.
#include "runtime/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"

namespace kiln::runtime {
namespace {

constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;
constexpr size_t kNoSize = SIZE_MAX;

// A device whose memory is bookkeeping only: segment handles are distinct
// numbers, events complete when complete()/synchronize() say so.
class FakeSource : public SegmentSource {
 public:
  explicit FakeSource(size_t limit = kNoSize) : limit_(limit) {}

  void* allocateSegment(size_t bytes) override {
    asked.push_back(bytes);
    if (bytes > limit_ - liveBytes) return nullptr;
    void* handle = reinterpret_cast<void*>(uintptr_t(0xd0000000) + 0x10 * ++handles_);
    live[handle] = bytes;
    liveBytes += bytes;
    return handle;
  }
  void freeSegment(void* handle) override {
    auto it = live.find(handle);
    ASSERT_NE(it, live.end()) << "free of a segment that is not live";
    liveBytes -= it->second;
    live.erase(it);
    freed++;
  }
  EventHandle createEvent() override {
    void* native = reinterpret_cast<void*>(uintptr_t(0xe0000000) + 0x10 * ++created);
    events[native] = {true, {}};
    return {native};
  }
  void destroyEvent(EventHandle event) override {
    EXPECT_EQ(events.erase(event.native), 1u) << "destroy of an unknown event";
    destroyed++;
  }
  void recordEvent(EventHandle event, StreamHandle stream) override {
    events.at(event.native) = {false, stream};
    recordedOn.push_back(stream);
  }
  bool queryEvent(EventHandle event) override { return events.at(event.native).done; }
  void synchronize() override {
    syncs++;
    for (auto& [native, state] : events) state.done = true;
  }

  /// Completes the events recorded on `stream`.
  void complete(StreamHandle stream) {
    for (auto& [native, state] : events)
      if (state.stream == stream) state.done = true;
  }
  bool isLive(void* handle) const { return live.contains(handle); }

  struct EventState {
    bool done;
    StreamHandle stream;
  };
  std::vector<size_t> asked;  // every allocateSegment request, refused or not
  std::map<void*, size_t> live;
  size_t liveBytes = 0;
  int freed = 0, created = 0, destroyed = 0, syncs = 0;
  std::map<void*, EventState> events;
  std::vector<StreamHandle> recordedOn;

 private:
  size_t limit_;
  uintptr_t handles_ = 0;
};

const StreamHandle s0{};
const StreamHandle s1{reinterpret_cast<void*>(uintptr_t(0x51))};
const StreamHandle s2{reinterpret_cast<void*>(uintptr_t(0x52))};
const Device kDevice = Device::cuda(0);

bool operator==(DevicePtr a, DevicePtr b) { return a.handle == b.handle && a.offset == b.offset; }

int64_t stat(const CachingAllocator& a, const std::string& key) {
  MemoryStats s = a.stats();
  auto it = s.find(key);
  EXPECT_NE(it, s.end()) << "no statistic " << key;
  return it == s.end() ? -1 : it->second;
}

void expectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// ---- rounding, pools, segments

TEST(CachingAllocator, RoundSizeIs512BStepsByDefault) {
  AllocConf c;
  EXPECT_EQ(CachingAllocator::roundSize(0, c), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(1, c), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(512, c), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(513, c), 1024u);
  EXPECT_EQ(CachingAllocator::roundSize(MiB - 1, c), MiB);
  EXPECT_EQ(CachingAllocator::roundSize(MiB + 1, c), MiB + 512);
  EXPECT_EQ(CachingAllocator::roundSize(5 * MiB + 1, c), 5 * MiB + 512);
  // Near SIZE_MAX (a negative size cast to size_t) nothing fits; no wrap-around.
  EXPECT_EQ(CachingAllocator::roundSize(kNoSize, c), kNoSize);
  EXPECT_EQ(CachingAllocator::roundSize(kNoSize - 100, c), kNoSize);
}

TEST(CachingAllocator, RoundSizeWithPower2Divisions) {
  AllocConf c;
  c.roundupPower2Divisions = 4;
  EXPECT_EQ(CachingAllocator::roundSize(1200, c), 1536u);  // at most 4 * 512 B: 512 B steps
  EXPECT_EQ(CachingAllocator::roundSize(2048, c), 2048u);
  EXPECT_EQ(CachingAllocator::roundSize(2049, c), 2560u);  // 2048 + 2048/4
  EXPECT_EQ(CachingAllocator::roundSize(3000, c), 3072u);
  EXPECT_EQ(CachingAllocator::roundSize(4097, c), 5120u);  // 4096 + 1024
  EXPECT_EQ(CachingAllocator::roundSize(MiB + 1, c), MiB + MiB / 4);
  EXPECT_EQ(CachingAllocator::roundSize(4 * MiB, c), 4 * MiB);
  EXPECT_EQ(CachingAllocator::roundSize((size_t(1) << 63) + 1, c), (size_t(1) << 63) + (size_t(1) << 61));
  EXPECT_EQ(CachingAllocator::roundSize(kNoSize - 1, c), kNoSize);
  c.roundupPower2Divisions = 8;
  EXPECT_EQ(CachingAllocator::roundSize(4097, c), 4608u);
  c.roundupPower2Divisions = 1;  // one division: off
  EXPECT_EQ(CachingAllocator::roundSize(4097, c), 4608u);
}

TEST(CachingAllocator, SegmentSizesByPool) {
  EXPECT_EQ(CachingAllocator::segmentSize(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segmentSize(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segmentSize(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segmentSize(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segmentSize(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segmentSize(11 * MiB), 12 * MiB);
  EXPECT_EQ(CachingAllocator::segmentSize(kNoSize), kNoSize);
}

TEST(CachingAllocator, RequestsGoToTheirPoolsAndSegments) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  // On streams of their own, so that none is carved from another's segment.
  DevicePtr small = a.allocate(MiB, s0);
  DevicePtr medium = a.allocate(MiB + 1, s0);
  DevicePtr large = a.allocate(12 * MiB + 1, s1);
  DevicePtr huge = a.allocate(100 * MiB, s2);
  EXPECT_EQ(src.asked, (std::vector<size_t>{2 * MiB, 20 * MiB, 14 * MiB, 100 * MiB}));
  for (DevicePtr p : {small, medium, large, huge}) {
    EXPECT_TRUE(src.isLive(p.handle));
    EXPECT_EQ(p.offset, 0u);
  }
  EXPECT_EQ(stat(a, "allocated_bytes.small_pool.current"), int64_t(MiB));
  EXPECT_EQ(stat(a, "allocated_bytes.large_pool.current"), int64_t(MiB + 512 + 12 * MiB + 512 + 100 * MiB));
  EXPECT_EQ(stat(a, "segment.small_pool.current"), 1);
  EXPECT_EQ(stat(a, "segment.large_pool.current"), 3);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(136 * MiB));
}

TEST(CachingAllocator, SmallRequestsShareASegment) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(1000, s0);
  DevicePtr q = a.allocate(1000, s0);
  EXPECT_EQ(src.asked.size(), 1u);
  EXPECT_EQ(p.handle, q.handle);
  EXPECT_EQ(p.offset, 0u);
  EXPECT_EQ(q.offset, 1024u);
}

TEST(CachingAllocator, ZeroByteRequestsGetDistinctBlocks) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(0, s0);
  DevicePtr q = a.allocate(0, s0);
  EXPECT_NE(p.handle, nullptr);
  EXPECT_FALSE(p == q);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 1024);
  EXPECT_EQ(stat(a, "requested_bytes.all.current"), 0);
}

// ---- streams

TEST(CachingAllocator, FreedBlockIsReusedOnItsStream) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(5 * MiB, s1);
  a.free(p);
  EXPECT_TRUE(a.allocate(5 * MiB, s1) == p);
  DevicePtr small = a.allocate(3000, s1);
  a.free(small);
  EXPECT_TRUE(a.allocate(3000, s1) == small);
  EXPECT_EQ(src.asked.size(), 2u);  // one large and one small segment
  EXPECT_EQ(stat(a, "num_device_alloc"), 2);
}

TEST(CachingAllocator, FreedBlockIsNotReusedOnAnotherStream) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(5 * MiB, s1);
  a.free(p);
  DevicePtr q = a.allocate(5 * MiB, s2);
  EXPECT_NE(q.handle, p.handle);
  EXPECT_EQ(src.asked.size(), 2u);
  EXPECT_TRUE(a.allocate(5 * MiB, s1) == p);  // still cached for s1
}

TEST(CachingAllocator, RecordStreamHoldsTheBlockUntilItsEventCompletes) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(5 * MiB, s1);  // a 20 MiB segment: p, then 15 MiB free
  a.recordStream(p, s2);
  a.free(p);
  ASSERT_EQ(src.recordedOn.size(), 1u);
  EXPECT_TRUE(src.recordedOn[0] == s2);
  // Freed but not reusable: no longer allocated, still active.
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "active_bytes.all.current"), int64_t(5 * MiB));

  DevicePtr q = a.allocate(5 * MiB, s1);
  EXPECT_EQ(q.handle, p.handle);
  EXPECT_EQ(q.offset, 5 * MiB);  // from the rest of the segment, not p

  src.complete(s2);
  DevicePtr r = a.allocate(5 * MiB, s1);
  EXPECT_TRUE(r == p);
  EXPECT_EQ(src.asked.size(), 1u);
  EXPECT_EQ(stat(a, "active_bytes.all.current"), int64_t(10 * MiB));

  // The event is reused for the next free that needs one.
  a.recordStream(r, s2);
  a.free(r);
  EXPECT_EQ(src.created, 1);
  EXPECT_EQ(src.recordedOn.size(), 2u);
}

TEST(CachingAllocator, RecordStreamOnTheAllocationStreamNeedsNoEvent) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(5 * MiB, s1);
  a.recordStream(p, s1);
  a.free(p);
  EXPECT_TRUE(src.recordedOn.empty());
  EXPECT_TRUE(a.allocate(5 * MiB, s1) == p);
}

TEST(CachingAllocator, RecordStreamOnTwoStreamsWaitsForBoth) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(1000, s0);
  a.recordStream(p, s1);
  a.recordStream(p, s2);
  a.recordStream(p, s2);  // once per stream
  a.free(p);
  EXPECT_EQ(src.recordedOn.size(), 2u);
  src.complete(s1);
  EXPECT_FALSE(a.allocate(1000, s0) == p);
  src.complete(s2);
  EXPECT_TRUE(a.allocate(1000, s0) == p);
}

// ---- splitting and merging

TEST(CachingAllocator, FreedNeighboursMergeIntoOneBlock) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(9 * MiB, s0);  // 20 MiB segment: 9 + 11 (split)
  EXPECT_EQ(stat(a, "inactive_split_bytes.large_pool.current"), int64_t(11 * MiB));
  DevicePtr q = a.allocate(11 * MiB, s0);  // the other 11 MiB, exactly
  EXPECT_EQ(q.handle, p.handle);
  EXPECT_EQ(q.offset, 9 * MiB);
  EXPECT_EQ(stat(a, "inactive_split.large_pool.current"), 0);
  a.free(p);
  EXPECT_EQ(stat(a, "inactive_split_bytes.large_pool.current"), int64_t(9 * MiB));
  a.free(q);
  EXPECT_EQ(stat(a, "inactive_split_bytes.large_pool.current"), 0);  // whole again
  DevicePtr whole = a.allocate(20 * MiB, s0);
  EXPECT_TRUE(whole == p);
  EXPECT_EQ(src.asked.size(), 1u);
}

TEST(CachingAllocator, SmallPoolSplitsAndMerges) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(MiB, s0);
  DevicePtr q = a.allocate(MiB, s0);
  EXPECT_EQ(q.handle, p.handle);
  EXPECT_EQ(q.offset, MiB);
  a.free(p);
  a.emptyCache();  // q still uses the segment
  EXPECT_EQ(src.freed, 0);
  a.free(q);
  a.emptyCache();  // p and q merged: the segment is unused
  EXPECT_EQ(src.freed, 1);
  EXPECT_TRUE(src.live.empty());
}

TEST(CachingAllocator, LargeBlocksSplitOnlyForMoreThanAMiB) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(12 * MiB, s0);  // a 12 MiB segment
  a.free(p);
  DevicePtr q = a.allocate(11 * MiB, s0);  // would leave 1 MiB: handed out whole
  EXPECT_TRUE(q == p);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), int64_t(12 * MiB));
  a.free(q);
  DevicePtr r = a.allocate(10 * MiB + 512 * KiB, s0);  // leaves 1.5 MiB: split
  EXPECT_TRUE(r == p);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), int64_t(10 * MiB + 512 * KiB));
  EXPECT_EQ(stat(a, "inactive_split_bytes.all.current"), int64_t(MiB + 512 * KiB));
  EXPECT_EQ(src.asked.size(), 1u);
}

// ---- max_split_size

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksWhole) {
  FakeSource src;
  AllocConf conf;
  conf.maxSplitSize = 40 * MiB;
  CachingAllocator a(kDevice, src, conf);
  DevicePtr big = a.allocate(50 * MiB, s0);
  a.free(big);
  DevicePtr normal = a.allocate(30 * MiB, s0);  // not carved from the 50 MiB block
  EXPECT_NE(normal.handle, big.handle);
  DevicePtr over = a.allocate(45 * MiB, s0);  // oversize: takes it whole
  EXPECT_TRUE(over == big);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), int64_t(80 * MiB));
  EXPECT_EQ(stat(a, "inactive_split.all.current"), 0);
  EXPECT_EQ(stat(a, "oversize_allocations.current"), 1);
  EXPECT_EQ(stat(a, "oversize_segments.current"), 1);
  EXPECT_EQ(src.asked.size(), 2u);
}

TEST(CachingAllocator, MaxSplitSizeLimitsTheWasteOfAnOversizeBlock) {
  FakeSource src;
  AllocConf conf;
  conf.maxSplitSize = 40 * MiB;
  CachingAllocator a(kDevice, src, conf);
  DevicePtr big = a.allocate(100 * MiB, s0);
  a.free(big);
  DevicePtr p = a.allocate(45 * MiB, s0);  // 100 MiB would waste 20 MiB or more
  EXPECT_NE(p.handle, big.handle);
  EXPECT_EQ(src.asked.size(), 2u);
}

TEST(CachingAllocator, WithoutMaxSplitSizeBigBlocksAreSplit) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr big = a.allocate(50 * MiB, s0);
  a.free(big);
  DevicePtr p = a.allocate(30 * MiB, s0);
  EXPECT_TRUE(p == big);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), int64_t(30 * MiB));
  EXPECT_EQ(stat(a, "inactive_split_bytes.all.current"), int64_t(20 * MiB));
}

// ---- out of memory

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeSource src(40 * MiB);
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(30 * MiB, s1);
  a.free(p);  // cached for s1, useless for s2
  DevicePtr q = a.allocate(20 * MiB, s2);
  EXPECT_TRUE(src.isLive(q.handle));
  EXPECT_FALSE(src.isLive(p.handle));
  EXPECT_EQ(src.asked, (std::vector<size_t>{30 * MiB, 20 * MiB, 20 * MiB}));
  EXPECT_EQ(stat(a, "num_alloc_retries"), 1);
  EXPECT_EQ(stat(a, "num_sync_all_streams"), 1);
  EXPECT_EQ(stat(a, "num_ooms"), 0);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(20 * MiB));
}

TEST(CachingAllocator, OutOfMemoryThrowsAndKeepsEarlierAllocations) {
  FakeSource src(40 * MiB);
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr big = a.allocate(30 * MiB, s1);
  DevicePtr small = a.allocate(1000, s1);
  std::string message;
  try {
    a.allocate(20 * MiB + 1, s1);  // a 22 MiB segment: 54 MiB > 40 MiB
    ADD_FAILURE() << "no out-of-memory error";
  } catch (const Error& e) {
    message = e.what();
  }
  expectContains(message, "cuda:0: out of memory");
  expectContains(message, "a request of 20971521 bytes (rounded to 20972032)");
  expectContains(message, "a new segment of 22.00 MiB");
  expectContains(message, "30.00 MiB allocated");
  expectContains(message, "32.00 MiB reserved");
  expectContains(message, "2.00 MiB free in the cache");
  expectContains(message, "limit none (the device is full)");
  EXPECT_EQ(stat(a, "num_ooms"), 1);
  EXPECT_EQ(stat(a, "num_alloc_retries"), 1);

  // Nothing allocated before is lost.
  EXPECT_TRUE(src.isLive(big.handle));
  EXPECT_TRUE(src.isLive(small.handle));
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), int64_t(30 * MiB + 1024));
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(32 * MiB));
  EXPECT_EQ(stat(a, "allocation.all.current"), 2);
  a.free(big);
  DevicePtr again = a.allocate(20 * MiB + 1, s1);  // from big's segment
  EXPECT_EQ(again.handle, big.handle);
  a.free(small);
  a.free(again);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
}

TEST(CachingAllocator, OutOfMemoryAtTheConfiguredLimit) {
  FakeSource src;
  AllocConf conf;
  conf.memoryLimit = 25 * MiB;
  CachingAllocator a(kDevice, src, conf);
  a.allocate(20 * MiB, s0);
  try {
    a.allocate(10 * MiB, s0);
    ADD_FAILURE() << "no out-of-memory error";
  } catch (const Error& e) {
    expectContains(e.what(), "limit 25.00 MiB (reached)");
  }
  EXPECT_EQ(src.asked.size(), 1u);  // the source was never asked past the limit
  EXPECT_EQ(stat(a, "num_ooms"), 1);
}

TEST(CachingAllocator, OutOfMemorySaysWhenTheDeviceIsFullBeforeTheLimit) {
  FakeSource src(30 * MiB);
  AllocConf conf;
  conf.memoryLimit = 100 * MiB;
  CachingAllocator a(kDevice, src, conf);
  a.allocate(20 * MiB, s0);
  try {
    a.allocate(20 * MiB, s0);
    ADD_FAILURE() << "no out-of-memory error";
  } catch (const Error& e) {
    expectContains(e.what(), "limit 100.00 MiB (not reached: the device is full)");
  }
}

TEST(CachingAllocator, HugeRequestsAreOutOfMemoryNotWrappedAround) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  EXPECT_THROW(a.allocate(kNoSize - 5, s0), Error);
  EXPECT_TRUE(src.asked.empty());
}

// ---- garbage collection

TEST(CachingAllocator, GarbageCollectionFreesTheOldestCachedSegments) {
  FakeSource src;
  AllocConf conf;
  conf.memoryLimit = 100 * MiB;
  conf.garbageCollectionThreshold = 0.5;
  CachingAllocator a(kDevice, src, conf);
  DevicePtr older = a.allocate(30 * MiB, s1);
  DevicePtr newer = a.allocate(24 * MiB, s1);
  a.free(older);
  a.free(newer);                           // 54 MiB reserved, above 50 MiB
  DevicePtr p = a.allocate(10 * MiB, s2);  // a miss: collect, then a new segment
  EXPECT_FALSE(src.isLive(older.handle));  // oldest first, though larger
  EXPECT_TRUE(src.isLive(newer.handle));   // 24 MiB left: under the threshold
  EXPECT_TRUE(src.isLive(p.handle));
  EXPECT_EQ(stat(a, "num_device_free"), 1);
  EXPECT_EQ(stat(a, "num_alloc_retries"), 0);
  EXPECT_EQ(stat(a, "num_sync_all_streams"), 0);
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(34 * MiB));
}

TEST(CachingAllocator, NoGarbageCollectionWhenOff) {
  FakeSource src;
  AllocConf conf;
  conf.memoryLimit = 100 * MiB;
  CachingAllocator a(kDevice, src, conf);
  DevicePtr older = a.allocate(30 * MiB, s1);
  DevicePtr newer = a.allocate(24 * MiB, s1);
  a.free(older);
  a.free(newer);
  a.allocate(10 * MiB, s2);
  EXPECT_TRUE(src.isLive(older.handle));
  EXPECT_TRUE(src.isLive(newer.handle));
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(64 * MiB));
}

// ---- statistics, emptyCache, lifetime

TEST(CachingAllocator, StatisticsAfterAScriptedSequence) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(1000, s0);     // small: 1024 of a 2 MiB segment
  DevicePtr q = a.allocate(5 * MiB, s0);  // large: 5 MiB of a 20 MiB segment
  a.free(p);                              // the small segment is whole again

  MemoryStats s = a.stats();
  for (const char* family : {"allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
                             "active_bytes", "inactive_split_bytes", "requested_bytes"})
    for (const char* pool : {"all", "large_pool", "small_pool"})
      for (const char* field : {"current", "peak", "allocated", "freed"}) {
        std::string key = fmt::format("{}.{}.{}", family, pool, field);
        EXPECT_TRUE(s.contains(key)) << key;
      }
  for (const char* key : {"num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                          "num_device_free", "oversize_allocations.current", "oversize_segments.peak"})
    EXPECT_TRUE(s.contains(key)) << key;

  const std::map<std::string, int64_t> expected = {
      {"allocated_bytes.all.current", 5 * MiB},
      {"allocated_bytes.all.peak", 5 * MiB + 1024},
      {"allocated_bytes.all.allocated", 5 * MiB + 1024},
      {"allocated_bytes.all.freed", 1024},
      {"allocated_bytes.small_pool.current", 0},
      {"allocated_bytes.small_pool.peak", 1024},
      {"allocated_bytes.large_pool.current", 5 * MiB},
      {"allocated_bytes.large_pool.freed", 0},
      {"requested_bytes.all.current", 5 * MiB},
      {"requested_bytes.all.peak", 5 * MiB + 1000},
      {"requested_bytes.all.freed", 1000},
      {"reserved_bytes.all.current", 22 * MiB},
      {"reserved_bytes.small_pool.current", 2 * MiB},
      {"reserved_bytes.large_pool.current", 20 * MiB},
      {"segment.all.current", 2},
      {"allocation.all.current", 1},
      {"allocation.all.allocated", 2},
      {"allocation.all.freed", 1},
      {"active.all.current", 1},
      {"active_bytes.all.current", 5 * MiB},
      {"inactive_split.small_pool.current", 0},
      {"inactive_split.small_pool.peak", 1},
      {"inactive_split_bytes.small_pool.allocated", 2 * MiB - 1024},
      {"inactive_split_bytes.small_pool.freed", 2 * MiB - 1024},
      {"inactive_split.large_pool.current", 1},
      {"inactive_split_bytes.large_pool.current", 15 * MiB},
      {"num_device_alloc", 2},
      {"num_device_free", 0},
      {"num_alloc_retries", 0},
      {"num_ooms", 0},
      {"num_sync_all_streams", 0},
  };
  for (auto& [key, value] : expected) EXPECT_EQ(s.at(key), value) << key;

  a.resetPeakStats();
  EXPECT_EQ(stat(a, "allocated_bytes.all.peak"), int64_t(5 * MiB));
  EXPECT_EQ(stat(a, "inactive_split.small_pool.peak"), 0);
  a.free(q);
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "allocated_bytes.all.peak"), int64_t(5 * MiB));
  EXPECT_EQ(stat(a, "inactive_split.all.current"), 0);
}

TEST(CachingAllocator, EmptyCacheReturnsUnusedSegments) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(1000, s0);
  DevicePtr q = a.allocate(5 * MiB, s0);
  DevicePtr r = a.allocate(50 * MiB, s1);
  a.recordStream(r, s2);
  a.free(q);
  a.free(r);  // waits for its event on s2
  a.emptyCache();
  EXPECT_EQ(src.syncs, 1);
  EXPECT_EQ(src.live.size(), 1u);
  EXPECT_TRUE(src.isLive(p.handle));
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(2 * MiB));
  EXPECT_EQ(stat(a, "active_bytes.all.current"), 1024);
  EXPECT_EQ(stat(a, "num_device_free"), 2);
  EXPECT_EQ(stat(a, "num_sync_all_streams"), 1);
}

TEST(CachingAllocator, DestructorGivesEverythingBack) {
  FakeSource src;
  {
    CachingAllocator a(kDevice, src, AllocConf());
    a.allocate(1000, s0);
    DevicePtr q = a.allocate(5 * MiB, s1);
    a.recordStream(q, s2);
    a.free(q);
    a.allocate(30 * MiB, s0);
  }
  EXPECT_TRUE(src.live.empty());
  EXPECT_EQ(src.created, src.destroyed);
}

TEST(CachingAllocator, FreeOfUnknownMemoryIsAnInternalError) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  DevicePtr p = a.allocate(1000, s0);
  EXPECT_THROW(a.free(DevicePtr{p.handle, 512}), InternalError);
  EXPECT_THROW(a.recordStream(DevicePtr{p.handle, 512}, s1), InternalError);
  a.free(DevicePtr{});  // null: nothing
  a.free(p);
  EXPECT_THROW(a.free(p), InternalError);  // twice
}

TEST(CachingAllocator, ConstructorRejectsABadConf) {
  FakeSource src;
  AllocConf conf;
  conf.maxSplitSize = 10 * MiB;
  EXPECT_THROW(CachingAllocator(kDevice, src, conf), Error);
}

TEST(CachingAllocator, SummaryNamesTheDeviceAndTheNumbers) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  a.allocate(5 * MiB, s0);
  std::string text = a.summary();
  expectContains(text, "cuda:0 caching allocator");
  expectContains(text, "allocated memory");
  expectContains(text, "5.00 MiB");
  expectContains(text, "reserved memory");
  expectContains(text, "20.00 MiB");
  expectContains(text, "from small pool");
}

TEST(CachingAllocator, ConcurrentAllocateAndFreeKeepTheBooks) {
  FakeSource src;
  CachingAllocator a(kDevice, src, AllocConf());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&a, t] {
      const StreamHandle stream{reinterpret_cast<void*>(uintptr_t(0x100 + t))};
      std::vector<DevicePtr> live;
      for (int i = 0; i < 400; i++) {
        live.push_back(a.allocate(size_t(1 + (i * 7919 + t) % 3000) * KiB, stream));
        if (i % 3 == 2) {
          a.free(live.front());
          live.erase(live.begin());
        }
      }
      for (DevicePtr p : live) a.free(p);
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(stat(a, "allocated_bytes.all.current"), 0);
  EXPECT_EQ(stat(a, "active.all.current"), 0);
  EXPECT_EQ(stat(a, "inactive_split.all.current"), 0);  // every segment merged whole
  EXPECT_EQ(stat(a, "reserved_bytes.all.current"), int64_t(src.liveBytes));
}

// ---- AllocConf

TEST(AllocConf, ParsesPyTorchKeys) {
  AllocConf c = AllocConf::parse("max_split_size_mb:256,garbage_collection_threshold:0.8,roundup_power2_divisions:4");
  EXPECT_EQ(c.maxSplitSize, 256 * MiB);
  EXPECT_DOUBLE_EQ(c.garbageCollectionThreshold, 0.8);
  EXPECT_EQ(c.roundupPower2Divisions, 4);
  EXPECT_EQ(c.memoryLimit, 0u);
  c = AllocConf::parse(" memory_limit_mb : 512 , max_split_size_mb:21,");
  EXPECT_EQ(c.memoryLimit, 512 * MiB);
  EXPECT_EQ(c.maxSplitSize, 21 * MiB);
}

TEST(AllocConf, EmptyIsTheDefaults) {
  AllocConf c = AllocConf::parse("");
  EXPECT_EQ(c.maxSplitSize, kNoSize);
  EXPECT_EQ(c.garbageCollectionThreshold, 0);
  EXPECT_EQ(c.roundupPower2Divisions, 0);
  EXPECT_EQ(c.memoryLimit, 0u);
}

TEST(AllocConf, RejectsUnknownKeysListingTheValidOnes) {
  try {
    AllocConf::parse("max_split_size_mb:64,expandable_segments:True");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expectContains(e.what(), "unknown key 'expandable_segments'");
    expectContains(e.what(),
                   "valid keys: max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions, "
                   "memory_limit_mb");
  }
}

TEST(AllocConf, RejectsBadValues) {
  const std::pair<const char*, const char*> cases[] = {
      {"max_split_size_mb:abc", "max_split_size_mb: 'abc' is not a whole number of MiB"},
      {"max_split_size_mb:-5", "max_split_size_mb: '-5' is not a whole number of MiB"},
      {"max_split_size_mb:64MB", "'64MB' is not a whole number of MiB"},
      {"max_split_size_mb:20", "max_split_size_mb: 20 is too small, must be more than 20"},
      {"max_split_size_mb:99999999999999999", "more than the address space"},
      {"garbage_collection_threshold:1.5", "garbage_collection_threshold must be between 0 and 1"},
      {"garbage_collection_threshold:-0.1", "garbage_collection_threshold must be between 0 and 1"},
      {"garbage_collection_threshold:high", "garbage_collection_threshold: 'high' is not a number"},
      {"roundup_power2_divisions:3", "roundup_power2_divisions must be 0 or a power of two (got 3)"},
      {"max_split_size_mb", "'max_split_size_mb' is not key:value"},
  };
  for (auto [text, message] : cases) {
    SCOPED_TRACE(text);
    try {
      AllocConf::parse(text);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      expectContains(e.what(), message);
    }
  }
}

TEST(AllocConf, FromEnvironment) {
  const char* saved = std::getenv("KILN_ALLOC_CONF");
  std::string restore = saved ? saved : "";
  setenv("KILN_ALLOC_CONF", "roundup_power2_divisions:8", 1);
  EXPECT_EQ(AllocConf::fromEnvironment().roundupPower2Divisions, 8);
  setenv("KILN_ALLOC_CONF", "", 1);
  EXPECT_EQ(AllocConf::fromEnvironment().roundupPower2Divisions, 0);
  unsetenv("KILN_ALLOC_CONF");
  EXPECT_EQ(AllocConf::fromEnvironment().maxSplitSize, kNoSize);
  setenv("KILN_ALLOC_CONF", "bogus:1", 1);
  EXPECT_THROW(AllocConf::fromEnvironment(), Error);
  if (saved)
    setenv("KILN_ALLOC_CONF", restore.c_str(), 1);
  else
    unsetenv("KILN_ALLOC_CONF");
}

}  // namespace
}  // namespace kiln::runtime
