// A device's memory as a user sees it (torch.cuda.memory_stats and
// friends): statistics of its caching allocator under PyTorch's names, a
// printable summary, peaks reset, the cache emptied. KILN_ALLOC_CONF
// configures the allocators (docs/allocator.md).
#pragma once

#include <string>

#include "runtime/allocator_stats.h"
#include "runtime/device.h"

namespace kiln {

/// "allocated_bytes.all.current", "reserved_bytes.all.peak", "num_ooms", ...
runtime::MemoryStats memoryStats(Device device);
std::string memorySummary(Device device);
void resetPeakMemoryStats(Device device);
/// Gives the device's cached, unused memory back to its driver (after
/// waiting for the device).
void emptyCache(Device device);

}  // namespace kiln
