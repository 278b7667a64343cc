// The profiler's view of an Executable's steps (runtime/executable_profile.h).
//
// Note [Bytes moved]
// A step's "bytes moved" is the sum, over its parameters, of the bytes of
// the buffer slot each one is bound to (inputs and outputs alike, a slot
// bound to two parameters counted twice); a copy moves its bytes twice
// (read and written). It is what the step would move if it read and wrote
// each buffer once: exact for elementwise kernels, a lower bound for a
// matmul (which reads its operands more than once from memory that is not
// cache) and an upper bound for a kernel that reads part of a view's slot.
// GB/s is bytes moved / duration, with the device's duration where it has
// timed events.
#include "runtime/executable_profile.h"

#include <variant>

#include "runtime/profiler_events.h"

namespace kiln::runtime {

namespace {

int64_t bytesMoved(const Executable& exe, const Step& step) {
  if (const auto* copy = std::get_if<CopyStep>(&step)) return 2 * static_cast<int64_t>(copy->bytes);
  int64_t bytes = 0;
  for (int slot : stepSlots(step)) bytes += static_cast<int64_t>(exe.slots[static_cast<size_t>(slot)].bytes);
  return bytes;
}

const char* launchName(const Step& step) {
  if (std::holds_alternative<KernelStep>(step)) return "launch_kernel";
  if (std::holds_alternative<LibraryStep>(step)) return "library_call";
  return "copy_device_to_device";
}

const char* kernelCategory(const Step& step) {
  if (std::holds_alternative<KernelStep>(step)) return "kernel";
  if (std::holds_alternative<LibraryStep>(step)) return "library";
  return "copy";
}

}  // namespace

void profiledStep(const Executable& exe, size_t s, std::span<const DevicePtr> bound, DeviceInterface& driver,
                  StreamHandle stream, EnqueueStepFn enqueue) {
  const uint32_t f = profiler::flags();
  const Step& step = exe.steps[s];
  const bool timed = (f & profiler::kDevice) && !driver.properties().hostAccessible;
  EventHandle start{}, end{};
  if (timed) {
    start = driver.createEvent(true);
    end = driver.createEvent(true);
    driver.recordEvent(start, stream);
  }
  const int64_t t0 = profiler::nowNs();
  try {
    enqueue(exe, s, bound, driver, stream);
    if (timed) driver.recordEvent(end, stream);
  } catch (...) {
    if (timed) {
      driver.destroyEvent(start);
      driver.destroyEvent(end);
    }
    throw;
  }
  const int64_t t1 = profiler::nowNs();
  const uint64_t correlation = profiler::nextCorrelation();
  if (f & profiler::kCpu) {
    profiler::TraceEvent launch;
    launch.name = launchName(step);
    launch.category = "launch";
    launch.startNs = t0;
    launch.endNs = t1;
    launch.device = exe.device.str();
    launch.correlation = correlation;
    launch.detail = stepName(step);
    profiler::record(std::move(launch));
  }
  if (f & profiler::kDevice) {
    profiler::TraceEvent kernel;
    kernel.kind = profiler::EventKind::kernel;
    kernel.name = stepName(step);
    kernel.category = kernelCategory(step);
    kernel.startNs = t0;
    kernel.endNs = t1;
    kernel.device = exe.device.str();
    kernel.stream = reinterpret_cast<uint64_t>(stream.native);
    kernel.correlation = correlation;
    kernel.bytes = bytesMoved(exe, step);
    if (timed)
      profiler::recordTimedKernel(std::move(kernel), driver, start.native, end.native);
    else
      profiler::record(std::move(kernel));
  }
}

void profiledUpload(const Executable& exe, size_t bytes, StreamHandle stream, int64_t startNs, int64_t endNs) {
  const uint32_t f = profiler::flags();
  const uint64_t correlation = profiler::nextCorrelation();
  profiler::TraceEvent e;
  e.startNs = startNs;
  e.endNs = endNs;
  e.device = exe.device.str();
  e.correlation = correlation;
  if (f & profiler::kCpu) {
    e.name = "copy_host_to_device";
    e.category = "launch";
    e.detail = "per-call inputs";
    profiler::record(profiler::TraceEvent(e));
  }
  if (f & profiler::kDevice) {
    e.kind = profiler::EventKind::kernel;
    e.name = "upload_inputs";
    e.category = "copy";
    e.stream = reinterpret_cast<uint64_t>(stream.native);
    e.bytes = static_cast<int64_t>(bytes);
    e.detail.clear();
    profiler::record(std::move(e));
  }
}

}  // namespace kiln::runtime
