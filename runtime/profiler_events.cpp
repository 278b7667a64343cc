// The profiler's collection core (runtime/profiler_events.h): per-thread
// buffers, the clock, thread ids, and the drain that resolves device times.
#include "runtime/profiler_events.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/device_interface.h"

namespace kiln::profiler {

namespace detail {
std::atomic<uint32_t> gFlags{0};
}

struct DeviceTiming {
  runtime::DeviceInterface* driver = nullptr;
  runtime::EventHandle start, end;
  bool resolved = false;
  ~DeviceTiming() {
    if (resolved || !driver) return;
    try {  // dropped unresolved (a warm-up step): the events still go back
      driver->destroyEvent(start);
      driver->destroyEvent(end);
    } catch (...) {
    }
  }
};

namespace {

struct ThreadBuffer {
  std::mutex mutex;
  std::vector<TraceEvent> events;
  uint32_t id = 0;
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  uint32_t nextThread = 1;
  std::atomic<uint64_t> nextCorrelation{1};
  std::atomic<bool> owned{false};
};

// Leaked on purpose: threads may record while statics are destroyed, and a
// KILN_PROFILE trace is written at exit (frontend/profiler_env.cpp).
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

ThreadBuffer& threadBuffer() {
  // The registry shares the buffer, so events outlive a thread that ends
  // (a compile helper) until the next drain.
  thread_local std::shared_ptr<ThreadBuffer> buffer = [] {
    auto b = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    b->id = r.nextThread++;
    r.buffers.push_back(b);
    return b;
  }();
  return *buffer;
}

/// Waits for a timed kernel's events and sets its duration (from its
/// launch's host start until placed by place()); keeps the host times when
/// the driver cannot say.
void resolve(TraceEvent& e) {
  DeviceTiming& t = *e.timing;
  try {
    t.driver->synchronizeEvent(t.end);
    const double ms = t.driver->elapsedMs(t.start, t.end);
    e.endNs = e.startNs + static_cast<int64_t>(ms * 1e6);
    e.detail = "device timed";
  } catch (...) {
    e.detail = "host timed (no device time)";
  }
  try {
    t.driver->destroyEvent(t.start);
    t.driver->destroyEvent(t.end);
  } catch (...) {
  }
  t.resolved = true;
  e.timing.reset();
}

}  // namespace

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t threadId() { return threadBuffer().id; }

uint64_t nextCorrelation() { return registry().nextCorrelation.fetch_add(1, std::memory_order_relaxed); }

void record(TraceEvent&& event) {
  ThreadBuffer& b = threadBuffer();
  event.thread = b.id;
  std::lock_guard lock(b.mutex);
  b.events.push_back(std::move(event));
}

void recordTimedKernel(TraceEvent&& event, runtime::DeviceInterface& driver, void* start, void* end) {
  auto timing = std::make_shared<DeviceTiming>();
  timing->driver = &driver;
  timing->start = {start};
  timing->end = {end};
  event.timing = std::move(timing);
  record(std::move(event));
}

void recordMemory(std::string_view device, int64_t bytes, int64_t totalAllocated, int64_t totalReserved) {
  if (!(flags() & kMemory)) return;
  TraceEvent e;
  e.kind = EventKind::memory;
  e.name = "[memory]";
  e.category = "memory";
  e.startNs = e.endNs = nowNs();
  e.device = device;
  e.bytes = bytes;
  e.totalAllocated = totalAllocated;
  e.totalReserved = totalReserved;
  record(std::move(e));
}

void RecordFunction::begin(std::string_view category, std::string_view name) {
  event_ = std::make_unique<TraceEvent>();
  event_->name = name;
  event_->category = category;
  event_->startNs = nowNs();
}

void RecordFunction::end() {
  event_->endNs = nowNs();
  record(std::move(*event_));
  event_.reset();
}

bool acquire() {
  bool expected = false;
  return registry().owned.compare_exchange_strong(expected, true);
}

void release() {
  setFlags(0);
  (void)drain();
  registry().owned.store(false);
}

void setFlags(uint32_t f) { detail::gFlags.store(f, std::memory_order_relaxed); }

std::vector<TraceEvent> drain() {
  Registry& r = registry();
  std::vector<TraceEvent> all;
  {
    std::lock_guard lock(r.mutex);
    for (const std::shared_ptr<ThreadBuffer>& b : r.buffers) {
      std::lock_guard bufferLock(b->mutex);
      std::move(b->events.begin(), b->events.end(), std::back_inserter(all));
      b->events.clear();
    }
    // Buffers of threads that have ended and hold nothing are dropped.
    std::erase_if(r.buffers, [](const std::shared_ptr<ThreadBuffer>& b) { return b.use_count() == 1; });
  }
  // Kernels on each stream run in launch order: a device-timed kernel
  // starts when it was launched or when the one before it on its stream
  // ended, whichever is later (Note [Device times] in docs/profiler.md).
  std::map<std::pair<std::string, uint64_t>, std::vector<TraceEvent*>> streams;
  for (TraceEvent& e : all)
    if (e.kind == EventKind::kernel) streams[{e.device, e.stream}].push_back(&e);
  for (auto& [key, kernels] : streams) {
    std::sort(kernels.begin(), kernels.end(),
              [](const TraceEvent* a, const TraceEvent* b) { return a->correlation < b->correlation; });
    int64_t previousEnd = 0;
    for (TraceEvent* k : kernels) {
      if (k->timing) {
        resolve(*k);
        const int64_t duration = k->endNs - k->startNs;
        k->startNs = std::max(k->startNs, previousEnd);
        k->endNs = k->startNs + duration;
      }
      previousEnd = std::max(previousEnd, k->endNs);
    }
  }
  // By start; an enclosing range (longer) before what it encloses.
  std::stable_sort(all.begin(), all.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::tie(a.startNs, b.endNs) < std::tie(b.startNs, a.endNs);
  });
  return all;
}

}  // namespace kiln::profiler
