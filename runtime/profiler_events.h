// Profiler events: the collection core of kiln's profiler (docs/profiler.md).
//
// Every layer records into it — the runtime its kernel launches and
// allocator events, passes/ one range per pass, codegen its lowering,
// compiles and cache lookups, the frontend its eager ops, traces and
// backward passes — and the user API (frontend/profiler.h) starts and
// stops collection, drains the events and exports them. This header is
// small on purpose: it is included by .cpp files only.
//
// Note [The profiler costs one load when off]
// Whether anything is recorded is one word, read with a relaxed atomic
// load (profiler::flags()); every recording site tests it first and does
// nothing else when it is 0, so an unprofiled program pays one load and a
// predictable branch per site. When on, an event goes into a buffer of the
// recording thread (a vector behind a mutex only that thread and a drain
// take), so threads do not contend with each other. Events keep the
// steady clock's nanoseconds; the export makes them relative.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {
class DeviceInterface;
}

namespace kiln::profiler {

/// What a profile records: bits of flags().
enum Flag : uint32_t {
  kCpu = 1u << 0,     ///< host ranges: ops, compile phases, launches
  kDevice = 1u << 1,  ///< kernels on their device's streams
  kShapes = 1u << 2,  ///< input shapes and dtypes of eager ops
  kMemory = 1u << 3,  ///< allocations and frees
};

namespace detail {
extern std::atomic<uint32_t> gFlags;
}

/// What is being recorded now; 0 when no profile is active (Note [The
/// profiler costs one load when off]).
inline uint32_t flags() { return detail::gFlags.load(std::memory_order_relaxed); }
inline bool enabled() { return flags() != 0; }

/// The steady clock, in nanoseconds.
int64_t nowNs();

enum class EventKind : uint8_t {
  range,   ///< a host interval on a thread (an op, a pass, a launch)
  kernel,  ///< a kernel, library call or copy on a device stream
  memory,  ///< an allocation (bytes > 0) or a free (bytes < 0)
};

struct DeviceTiming;

/// One recorded event.
struct TraceEvent {
  EventKind kind = EventKind::range;
  std::string name;
  std::string category;  ///< "op", "compile", "pass", "codegen", "cache", "autograd", "launch", "kernel", ...
  int64_t startNs = 0, endNs = 0;
  uint32_t thread = 0;                       ///< the recording thread (threadId())
  std::string device;                        ///< kernel and memory events: "cpu", "opencl:0"
  uint64_t stream = 0;                       ///< kernel events: the stream's native handle (0: the default stream)
  uint64_t correlation = 0;                  ///< a launch range and its kernel share it (nonzero)
  int64_t bytes = 0;                         ///< kernel: bytes moved; memory: + allocated or - freed
  int64_t totalAllocated = 0;                ///< memory: the device's allocated bytes after the event
  int64_t totalReserved = 0;                 ///< memory: the device's reserved bytes after the event
  std::vector<std::vector<int64_t>> shapes;  ///< ops with kShapes: each tensor input's shape
  std::vector<std::string> dtypes;           ///< ops with kShapes: each tensor input's dtype
  std::string detail;                        ///< free text: "hit", the kernel a cache looked up, ...
  /// Kernels on devices with timed events, until drain() resolves them.
  std::shared_ptr<DeviceTiming> timing;
};

/// A small id of the calling thread (1, 2, ... in order of first use).
uint32_t threadId();
/// A new correlation id.
uint64_t nextCorrelation();

/// Adds `event` to the calling thread's buffer (sets its thread).
void record(TraceEvent&& event);

/// A kernel whose device times come from timed events `start` and `end`
/// recorded around it on `driver`: drain() waits for them and places the
/// kernel on its stream (docs/profiler.md, "Device times").
void recordTimedKernel(TraceEvent&& event, runtime::DeviceInterface& driver, void* start, void* end);

/// A memory event on `device`, if kMemory is on.
void recordMemory(std::string_view device, int64_t bytes, int64_t totalAllocated, int64_t totalReserved);

/// A host range, recorded at its end if kCpu was on at its start.
class RecordFunction {
 public:
  RecordFunction(std::string_view category, std::string_view name) {
    if (flags() & kCpu) [[unlikely]]
      begin(category, name);
  }
  ~RecordFunction() {
    if (event_) [[unlikely]]
      end();
  }
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;
  /// The event being recorded, null when nothing is (to add shapes, detail).
  TraceEvent* event() { return event_.get(); }

 private:
  void begin(std::string_view category, std::string_view name);
  void end();
  std::unique_ptr<TraceEvent> event_;
};

// Collection, for the profile that owns it (frontend/profiler.h).
/// Takes collection for one profile; false when another profile has it.
bool acquire();
/// Gives it back (flags become 0; what was recorded is dropped).
void release();
/// Sets what is recorded (0: nothing, until set again).
void setFlags(uint32_t flags);
/// Every thread's events so far, emptied: kernels with device timings
/// resolved (this waits for them), sorted by start.
std::vector<TraceEvent> drain();

}  // namespace kiln::profiler
