// AllocatorStats: the byte counts every device's caching allocator keeps
// (DeviceInterface::memoryStats).
#pragma once

#include <cstdint>

namespace kiln::runtime {

/// Byte counts kept by an allocator; peaks are since the last resetPeakStats().
struct AllocatorStats {
  int64_t allocatedBytes = 0;  ///< bytes in blocks handed out now (rounded sizes)
  int64_t peakAllocatedBytes = 0;
  int64_t reservedBytes = 0;  ///< bytes held from the OS: handed out + cached
  int64_t peakReservedBytes = 0;
  int64_t numAllocations = 0;    ///< allocate() calls
  int64_t numCacheHits = 0;      ///< allocate() calls served from the cache
  int64_t numOsAllocations = 0;  ///< blocks obtained from the OS
};

}  // namespace kiln::runtime
