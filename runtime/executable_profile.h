// What the profiler records of an Executable's steps (runtime/profiler_events.h):
// internal to runtime/executable*.cpp.
#pragma once

#include <cstddef>
#include <span>

#include "runtime/executable.h"

namespace kiln::runtime {

/// Enqueues step `s` of `exe` with its bound buffers (what launchStep does
/// once the buffers are bound).
using EnqueueStepFn = void (*)(const Executable& exe, size_t s, std::span<const DevicePtr> bound,
                               DeviceInterface& driver, StreamHandle stream);

/// Runs `enqueue` for step `s` and records it while a profile is active: a
/// launch range on the calling thread and the kernel (library call, copy)
/// on its device's stream, paired by a correlation id, with the bytes it
/// moves; on a device with timed events the kernel's duration comes from
/// events recorded around it (Note [Device times] in docs/profiler.md).
void profiledStep(const Executable& exe, size_t s, std::span<const DevicePtr> bound, DeviceInterface& driver,
                  StreamHandle stream, EnqueueStepFn enqueue);

/// Records the upload of a run's per-call host inputs (one command of
/// kernelLaunchCount()), which took [startNs, endNs) on the host.
void profiledUpload(const Executable& exe, size_t bytes, StreamHandle stream, int64_t startNs, int64_t endNs);

}  // namespace kiln::runtime
