// A simulated device for tests of the device seam (runtime/device_interface.h,
// codegen/target.h): registered as `cuda`, it keeps its memory on the host
// but behind handles that are not host addresses, and it defers all work.
//
// - Memory: a handle is a small token (0x1000, 0x2000, ...); only the
//   driver maps it to host memory, so any code above runtime/ that
//   dereferences a handle as a pointer crashes the test. Freed blocks go to
//   a free list and are reused in stream order, as a caching allocator's.
// - Streams: every copy, fill, launch and library call is queued on its
//   stream and runs only when the host waits — synchronize, a query, a
//   copy to the host (which waits for its stream first) — so code that
//   reads results without waiting reads stale memory. Events record a
//   position in a stream's queue; waiting on one runs that stream up to it
//   first.
// - Kernels: compiled by the CPU's LLVM backend and run on the host over
//   the token-mapped memory; library calls run the CPU's functions likewise.
//
// simulatedDevice() registers it once and returns the driver, with counters
// for tests.
#pragma once

#include <cstdint>

#include "runtime/device.h"

namespace kiln::testing {

struct SimulatedDeviceCounters {
  int64_t launches = 0;        ///< kernels run
  int64_t libraryCalls = 0;    ///< library calls run
  int64_t hostToDevice = 0;    ///< copies from the host
  int64_t deviceToHost = 0;    ///< copies to the host
  int64_t deviceToDevice = 0;  ///< copies on the device
  int64_t pending = 0;         ///< operations queued and not yet run, on every stream
};

/// Registers the simulated device as `cuda` (runtime driver and codegen
/// target) on first use; returns cuda:0.
Device simulatedDevice();

/// What the simulated device has done so far.
SimulatedDeviceCounters simulatedCounters();

}  // namespace kiln::testing
