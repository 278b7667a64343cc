// kiln's profiler, torch.profiler's model (docs/profiler.md):
//
//   kiln::profiler::Profile prof({.schedule = kiln::profiler::Schedule{.wait = 1, .warmup = 1, .active = 3},
//                                 .recordShapes = true,
//                                 .onTraceReady = [](kiln::profiler::Profile& p) {
//                                   p.exportChromeTrace("trace.json");
//                                 }});
//   prof.start();
//   for (int i = 0; i < 5; ++i) {
//     trainStep();
//     prof.step();
//   }
//   prof.stop();
//   std::cout << prof.keyAverages().table("self_cpu_time_total", 10);
//
// It records eager ops, compile phases, passes, codegen and kernel cache
// lookups, autograd, kernel launches with their kernels on the device's
// streams, and allocations (runtime/profiler_events.h collects them), and
// exports a Chrome trace that Perfetto and chrome://tracing load.
// KILN_PROFILE=path profiles a whole program (frontend/profiler_env.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/profiler_events.h"

namespace kiln::profiler {

/// What a profile records: host activity (ops, compile phases, launches)
/// and the device's (kernels on streams, with device times).
enum class ProfilerActivity : uint8_t { cpu, device };

/// torch.profiler.schedule: after `skipFirst` steps, cycles of `wait`
/// steps that record nothing, `warmup` steps that record and drop it, and
/// `active` steps that record; after the last active step of a cycle the
/// trace is ready. `repeat` cycles (0: until stop()).
struct Schedule {
  int wait = 0;
  int warmup = 0;
  int active = 1;
  int repeat = 0;
  int skipFirst = 0;
};

class Profile;

struct ProfileOptions {
  std::vector<ProfilerActivity> activities{ProfilerActivity::cpu, ProfilerActivity::device};
  /// None: everything from start() to stop() is one trace.
  std::optional<Schedule> schedule;
  /// Eager ops record their inputs' shapes and dtypes.
  bool recordShapes = false;
  /// Allocations and frees, with the device's allocated and reserved bytes.
  bool profileMemory = false;
  /// Called when a trace is ready: at the end of each cycle's active steps,
  /// and at stop() when steps were recorded since; the profile's events(),
  /// keyAverages() and exportChromeTrace() then describe that trace.
  std::function<void(Profile&)> onTraceReady;
};

/// One row of keyAverages(): the events of one name. Times in microseconds.
struct KeyAverage {
  std::string name;
  int64_t count = 0;
  double cpuTimeTotal = 0, selfCpuTimeTotal = 0;
  /// Kernels: their own time; host ranges: the time of the kernels they
  /// launched, directly or through what they enclose.
  double deviceTimeTotal = 0, selfDeviceTimeTotal = 0;
  int64_t bytesMoved = 0;  ///< kernels: Note [Bytes moved] (runtime/executable_profile.cpp)
};

/// torch's key_averages(): events grouped by name.
class KeyAverages {
 public:
  explicit KeyAverages(std::vector<KeyAverage> rows) : rows_(std::move(rows)) {}
  /// The rows sorted by `sortBy`, largest first: "cpu_time_total",
  /// "self_cpu_time_total", "device_time_total", "self_device_time_total"
  /// or "count"; kiln::Error for another key.
  std::vector<KeyAverage> sorted(std::string_view sortBy) const;
  /// A table of the first `rowLimit` sorted rows (all when negative).
  std::string table(std::string_view sortBy = "cpu_time_total", int rowLimit = -1) const;
  const std::vector<KeyAverage>& rows() const { return rows_; }

 private:
  std::vector<KeyAverage> rows_;
};

class Profile {
 public:
  explicit Profile(ProfileOptions options = {});
  /// Stops the profile if it runs (errors of onTraceReady are dropped).
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// Starts recording (at step 0 of the schedule); kiln::Error when another
  /// profile is active (KILN_PROFILE's included).
  void start();
  /// Stops recording; the trace so far is ready (onTraceReady) if it holds
  /// recorded steps.
  void stop();
  /// Ends a step and begins the next (torch's prof.step()).
  void step();
  int64_t stepNum() const { return stepNum_; }
  bool running() const { return running_; }

  /// The events of the last trace ready, sorted by start.
  const std::vector<TraceEvent>& events() const { return events_; }
  /// The last trace as Chrome trace JSON (docs/profiler.md, "The trace").
  std::string chromeTrace() const;
  /// Writes chromeTrace() to `path`; kiln::Error when it cannot.
  void exportChromeTrace(const std::string& path) const;
  KeyAverages keyAverages() const;

 private:
  enum class Action : uint8_t { none, warmup, record, recordAndSave };
  Action action(int64_t step) const;
  uint32_t recordingFlags() const;
  void traceReady();

  ProfileOptions options_;
  bool running_ = false;
  int64_t stepNum_ = 0;
  int64_t stepStartNs_ = 0;
  std::vector<TraceEvent> events_;
};

/// The Chrome trace JSON of `events` (what Profile::chromeTrace() writes).
std::string chromeTraceJson(const std::vector<TraceEvent>& events);
/// keyAverages() of `events`.
KeyAverages keyAveragesOf(const std::vector<TraceEvent>& events);

}  // namespace kiln::profiler
