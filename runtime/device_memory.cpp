// runtime/device_memory.h over the device interface.
#include "runtime/device_memory.h"

#include "runtime/device_interface.h"

namespace kiln {

runtime::MemoryStats memoryStats(Device device) { return runtime::deviceInterface(device).keyedMemoryStats(); }
std::string memorySummary(Device device) { return runtime::deviceInterface(device).memorySummary(); }
void resetPeakMemoryStats(Device device) { runtime::deviceInterface(device).resetPeakMemoryStats(); }
void emptyCache(Device device) { runtime::deviceInterface(device).emptyCache(); }

}  // namespace kiln
