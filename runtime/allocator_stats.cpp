// Conversions between the two forms of allocator statistics (runtime/allocator_stats.h).
#include "runtime/allocator_stats.h"

#include "runtime/device_interface.h"

namespace kiln::runtime {

MemoryStats keyedStats(const AllocatorStats& s) {
  return {
      {"allocated_bytes.all.current", s.allocatedBytes},
      {"allocated_bytes.all.peak", s.peakAllocatedBytes},
      {"reserved_bytes.all.current", s.reservedBytes},
      {"reserved_bytes.all.peak", s.peakReservedBytes},
      {"allocation.all.allocated", s.numAllocations},
      {"num_cache_hits", s.numCacheHits},
      {"num_device_alloc", s.numOsAllocations},
  };
}

AllocatorStats summarizeStats(const MemoryStats& stats) {
  auto get = [&](const char* key) {
    auto it = stats.find(key);
    return it == stats.end() ? int64_t{0} : it->second;
  };
  AllocatorStats s;
  s.allocatedBytes = get("allocated_bytes.all.current");
  s.peakAllocatedBytes = get("allocated_bytes.all.peak");
  s.reservedBytes = get("reserved_bytes.all.current");
  s.peakReservedBytes = get("reserved_bytes.all.peak");
  s.numAllocations = get("allocation.all.allocated");
  s.numOsAllocations = get("num_device_alloc");
  s.numCacheHits = s.numAllocations - s.numOsAllocations;
  return s;
}

MemoryStats DeviceInterface::keyedMemoryStats() const { return keyedStats(memoryStats()); }

}  // namespace kiln::runtime
