// Unit tests for the caching HostAllocator and Buffer: size classes (512 B
// steps below 1 MiB, 2 MiB steps from there on), 64-byte alignment, zero-byte
// requests, the statistics after allocate/release (allocated, reserved, peaks,
// cache hits), the reuse rule for larger cached blocks, resetPeakStats,
// emptyCache, out-of-memory errors that leave the allocator as it was, and
// Buffer/allocateBuffer on the process-wide allocator. Tests use a local
// HostAllocator where they can, so that other tests' memory does not show up
// in the numbers.
#include "runtime/allocator.h"
#include "runtime/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <set>

#include "runtime/error.h"

namespace kiln::runtime {
namespace {

constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(HostAllocator, RoundSizeSmallClassesAre512BSteps) {
  EXPECT_EQ(HostAllocator::roundSize(0), 512u);
  EXPECT_EQ(HostAllocator::roundSize(1), 512u);
  EXPECT_EQ(HostAllocator::roundSize(511), 512u);
  EXPECT_EQ(HostAllocator::roundSize(512), 512u);
  EXPECT_EQ(HostAllocator::roundSize(513), 1024u);
  EXPECT_EQ(HostAllocator::roundSize(4000), 4096u);
  EXPECT_EQ(HostAllocator::roundSize(MiB - 512), MiB - 512);
  EXPECT_EQ(HostAllocator::roundSize(MiB - 511), MiB);
  EXPECT_EQ(HostAllocator::roundSize(MiB - 1), MiB);
  // Every request below 1 MiB: the next multiple of 512 (at least 512).
  for (size_t n = 1; n < MiB; n += 97) {
    size_t r = HostAllocator::roundSize(n);
    ASSERT_EQ(r % 512, 0u) << n;
    ASSERT_GE(r, n);
    ASSERT_LT(r - n, 512u) << n;
  }
}

TEST(HostAllocator, RoundSizeLargeClassesAre2MiBSteps) {
  EXPECT_EQ(HostAllocator::roundSize(MiB), 2 * MiB);
  EXPECT_EQ(HostAllocator::roundSize(MiB + 1), 2 * MiB);
  EXPECT_EQ(HostAllocator::roundSize(2 * MiB), 2 * MiB);
  EXPECT_EQ(HostAllocator::roundSize(2 * MiB + 1), 4 * MiB);
  EXPECT_EQ(HostAllocator::roundSize(3 * MiB), 4 * MiB);
  EXPECT_EQ(HostAllocator::roundSize(100 * MiB + 7), 102 * MiB);
  EXPECT_EQ(HostAllocator::roundSize(size_t(1) << 40), size_t(1) << 40);
}

TEST(HostAllocator, RoundSizeNeverWrapsAround) {
  // A request near SIZE_MAX (a negative size cast to size_t) has no class;
  // it must not round to a small block.
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  for (size_t n : {kMax, kMax - 1, kMax - MiB, kMax - 2 * MiB + 2}) {
    SCOPED_TRACE(n);
    EXPECT_GE(HostAllocator::roundSize(n), n);
  }
}

TEST(HostAllocator, AllocationIsAlignedWritableAndCounted) {
  HostAllocator a;
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned64(p));
  std::memset(p, 0xab, 1024);  // the whole 1024 B class is ours
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 1024);
  EXPECT_EQ(s.reservedBytes, 1024);
  EXPECT_EQ(s.peakAllocatedBytes, 1024);
  EXPECT_EQ(s.peakReservedBytes, 1024);
  EXPECT_EQ(s.numAllocations, 1);
  EXPECT_EQ(s.numCacheHits, 0);
  EXPECT_EQ(s.numOsAllocations, 1);

  a.release(p);
  s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 0);
  EXPECT_EQ(s.reservedBytes, 1024) << "a released block stays cached";
  EXPECT_EQ(s.peakAllocatedBytes, 1024);
  EXPECT_EQ(s.peakReservedBytes, 1024);
}

TEST(HostAllocator, SameClassIsACacheHitWithTheSamePointer) {
  HostAllocator a;
  void* p = a.allocate(3000);  // class 3072
  a.release(p);
  void* q = a.allocate(3000);
  EXPECT_EQ(q, p);
  a.release(q);
  void* r = a.allocate(2600);  // also class 3072
  EXPECT_EQ(r, p);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.numAllocations, 3);
  EXPECT_EQ(s.numCacheHits, 2);
  EXPECT_EQ(s.numOsAllocations, 1);
  EXPECT_EQ(s.allocatedBytes, 3072);
  EXPECT_EQ(s.reservedBytes, 3072);
  a.release(r);
}

TEST(HostAllocator, LiveBlocksAreDistinct) {
  HostAllocator a;
  void* p = a.allocate(64);
  void* q = a.allocate(64);
  EXPECT_NE(p, q) << "a live block must not be handed out twice";
  EXPECT_EQ(a.stats().allocatedBytes, 1024);
  EXPECT_EQ(a.stats().numCacheHits, 0);
  a.release(p);
  a.release(q);
}

TEST(HostAllocator, LargerCachedBlockIsReusedOnlyWhenItWastesAtMostAQuarter) {
  HostAllocator a;
  void* big = a.allocate(2048);
  a.release(big);
  // 1536 B from a 2048 B block wastes 512 B = a quarter: reused, counted whole.
  void* p = a.allocate(1536);
  EXPECT_EQ(p, big);
  EXPECT_EQ(a.stats().numCacheHits, 1);
  EXPECT_EQ(a.stats().allocatedBytes, 2048);
  a.release(p);
  // 1024 B from it would waste half: a fresh block instead.
  void* q = a.allocate(1024);
  EXPECT_NE(q, big);
  EXPECT_EQ(a.stats().numCacheHits, 1);
  EXPECT_EQ(a.stats().numOsAllocations, 2);
  EXPECT_EQ(a.stats().allocatedBytes, 1024);
  EXPECT_EQ(a.stats().reservedBytes, 2048 + 1024);
  a.release(q);
}

TEST(HostAllocator, LargeRequestsUse2MiBClasses) {
  HostAllocator a;
  void* p = a.allocate(3 * MiB);
  EXPECT_TRUE(aligned64(p));
  EXPECT_EQ(a.stats().allocatedBytes, static_cast<int64_t>(4 * MiB));
  a.release(p);
  void* q = a.allocate(3 * MiB + 5 * KiB);  // same 4 MiB class
  EXPECT_EQ(q, p);
  a.release(q);
}

TEST(HostAllocator, PeaksAndResetPeakStats) {
  HostAllocator a;
  void* p = a.allocate(512);
  void* q = a.allocate(4096);
  a.release(q);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocatedBytes, 512);
  EXPECT_EQ(s.peakAllocatedBytes, 512 + 4096);
  EXPECT_EQ(s.reservedBytes, 512 + 4096);
  EXPECT_EQ(s.peakReservedBytes, 512 + 4096);

  a.emptyCache();
  a.resetPeakStats();
  s = a.stats();
  EXPECT_EQ(s.peakAllocatedBytes, 512) << "peak restarts from what is allocated now";
  EXPECT_EQ(s.peakReservedBytes, 512);
  EXPECT_EQ(s.numAllocations, 2) << "reset touches peaks only";

  void* r = a.allocate(1024);
  EXPECT_EQ(a.stats().peakAllocatedBytes, 512 + 1024);
  a.release(r);
  a.release(p);
}

TEST(HostAllocator, EmptyCacheReleasesCachedBytesOnly) {
  HostAllocator a;
  void* live = a.allocate(2048);
  void* cached1 = a.allocate(1024);
  void* cached2 = a.allocate(3 * MiB);
  a.release(cached1);
  a.release(cached2);
  EXPECT_EQ(a.stats().reservedBytes, static_cast<int64_t>(2048 + 1024 + 4 * MiB));

  a.emptyCache();
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.reservedBytes, 2048);
  EXPECT_EQ(s.allocatedBytes, 2048);
  EXPECT_EQ(s.peakReservedBytes, static_cast<int64_t>(2048 + 1024 + 4 * MiB)) << "peaks stay until reset";

  // Nothing is cached any more: the next request of a released size goes to the OS.
  void* again = a.allocate(1024);
  EXPECT_EQ(a.stats().numCacheHits, 0);
  EXPECT_EQ(a.stats().numOsAllocations, 4);
  a.release(again);
  a.release(live);
  a.emptyCache();
  EXPECT_EQ(a.stats().reservedBytes, 0);
}

TEST(HostAllocator, ZeroByteAllocationsAreValidAndUnique) {
  HostAllocator a;
  void* p = a.allocate(0);
  void* q = a.allocate(0);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(p, q);
  EXPECT_TRUE(aligned64(p));
  EXPECT_TRUE(aligned64(q));
  EXPECT_EQ(a.stats().allocatedBytes, 1024);  // two of the smallest class
  a.release(p);
  a.release(q);
  EXPECT_EQ(a.stats().allocatedBytes, 0);
}

TEST(HostAllocator, ReleaseOfNullIsANoOpAndOfAForeignPointerIsABug) {
  HostAllocator a;
  EXPECT_NO_THROW(a.release(nullptr));
  int onStack = 0;
  EXPECT_THROW(a.release(&onStack), InternalError);
  // Releasing twice is a bug too, and must not corrupt the counts.
  void* p = a.allocate(100);
  a.release(p);
  EXPECT_THROW(a.release(p), InternalError);
  EXPECT_EQ(a.stats().allocatedBytes, 0);
  EXPECT_EQ(a.stats().reservedBytes, 512);
}

TEST(HostAllocator, OutOfMemoryIsAnErrorThatSaysWhatWasAsked) {
  HostAllocator a;
  void* live = a.allocate(1000);
  const size_t huge = size_t(1) << 60;  // more than any address space
  try {
    a.allocate(huge);
    FAIL() << "allocated 2^60 bytes";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("out of memory", 0), 0u) << msg;
    EXPECT_NE(msg.find(std::to_string(huge)), std::string::npos) << "names the request: " << msg;
    EXPECT_NE(msg.find("1024 bytes allocated"), std::string::npos) << msg;
  }
  // The failed call changed nothing that was there before it.
  EXPECT_EQ(a.stats().allocatedBytes, 1024);
  EXPECT_EQ(a.stats().reservedBytes, 1024);
  a.release(live);
}

TEST(HostAllocator, RequestsNearSizeMaxAreOutOfMemory) {
  // A negative byte count cast to size_t must fail, not hand out a tiny block.
  HostAllocator a;
  for (size_t n : {std::numeric_limits<size_t>::max(), std::numeric_limits<size_t>::max() - 1000}) {
    SCOPED_TRACE(n);
    EXPECT_THROW(a.allocate(n), Error);
  }
  EXPECT_EQ(a.stats().allocatedBytes, 0);
}

TEST(HostAllocator, MemorySummaryReportsMiB) {
  HostAllocator a;
  void* p = a.allocate(3 * MiB);  // 4 MiB class
  const std::string summary = a.memorySummary();
  EXPECT_NE(summary.find("allocated: 4.0 MiB"), std::string::npos) << summary;
  EXPECT_NE(summary.find("reserved:  4.0 MiB"), std::string::npos) << summary;
  a.release(p);
}

TEST(Buffer, CpuBufferComesFromTheGlobalAllocatorAndGoesBack) {
  HostAllocator& global = HostAllocator::instance();
  const int64_t before = global.stats().allocatedBytes;
  {
    auto buf = allocateBuffer(Device::cpu(), 100);
    ASSERT_NE(buf->hostData(), nullptr);
    EXPECT_TRUE(aligned64(buf->hostData()));
    EXPECT_EQ(buf->bytes(), 100u);
    EXPECT_EQ(buf->device(), Device::cpu());
    EXPECT_EQ(global.stats().allocatedBytes, before + 512);
  }
  EXPECT_EQ(global.stats().allocatedBytes, before);
}

TEST(Buffer, CudaBufferIsAnErrorNamingTheDevice) {
  try {
    Buffer b(Device::cuda(1), 16);
    FAIL() << "allocated on cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::runtime
