// AllocatorStats: the byte counts every device's caching allocator keeps
// (DeviceInterface::memoryStats).
#pragma once

#include <cstdint>
#include <map>
#include <string>

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

/// Statistics under PyTorch's names ("allocated_bytes.all.current", ...;
/// docs/allocator.md lists them), in name order: what the caching
/// allocator of a device keeps (runtime/caching_allocator.h).
using MemoryStats = std::map<std::string, int64_t>;

/// The PyTorch-named statistics an AllocatorStats has.
MemoryStats keyedStats(const AllocatorStats& stats);
/// The AllocatorStats of PyTorch-named statistics.
AllocatorStats summarizeStats(const MemoryStats& stats);

}  // namespace kiln::runtime
