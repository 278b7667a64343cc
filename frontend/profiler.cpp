// kiln::profiler::Profile (frontend/profiler.h): the schedule of
// torch.profiler over the collection core of runtime/profiler_events.h.
#include "frontend/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "runtime/error.h"

namespace kiln::profiler {

Profile::Profile(ProfileOptions options) : options_(std::move(options)) {}

Profile::~Profile() {
  if (!running_) return;
  try {
    stop();
  } catch (...) {
    release();
  }
}

uint32_t Profile::recordingFlags() const {
  uint32_t f = 0;
  for (ProfilerActivity a : options_.activities) f |= a == ProfilerActivity::cpu ? kCpu : kDevice;
  if (options_.recordShapes && (f & kCpu)) f |= kShapes;
  if (options_.profileMemory) f |= kMemory;
  return f;
}

// torch.profiler.schedule's steps.
Profile::Action Profile::action(int64_t step) const {
  if (!options_.schedule) return Action::record;
  const Schedule& s = *options_.schedule;
  if (step < s.skipFirst) return Action::none;
  step -= s.skipFirst;
  const int64_t cycle = s.wait + s.warmup + s.active;
  if (s.repeat > 0 && step / cycle >= s.repeat) return Action::none;
  const int64_t at = step % cycle;
  if (at < s.wait) return Action::none;
  if (at < s.wait + s.warmup) return Action::warmup;
  return at < cycle - 1 ? Action::record : Action::recordAndSave;
}

void Profile::start() {
  KILN_CHECK(!running_, "profiler: start of a profile that is running");
  if (options_.schedule) {
    const Schedule& s = *options_.schedule;
    KILN_CHECK(s.wait >= 0 && s.warmup >= 0 && s.active >= 1 && s.repeat >= 0 && s.skipFirst >= 0,
               "profiler: a schedule needs wait, warmup, repeat and skipFirst >= 0 and active >= 1, got wait={} "
               "warmup={} active={} repeat={} skipFirst={}",
               s.wait, s.warmup, s.active, s.repeat, s.skipFirst);
  }
  KILN_CHECK(recordingFlags() & (kCpu | kDevice), "profiler: no activity to record (activities is empty)");
  KILN_CHECK(acquire(),
             "profiler: another profile is active (one at a time; KILN_PROFILE holds one for the whole "
             "program)");
  running_ = true;
  stepNum_ = 0;
  events_.clear();
  (void)drain();  // what a thread left from before (nothing, unless recorded while off)
  stepStartNs_ = nowNs();
  setFlags(action(0) == Action::none ? 0 : recordingFlags());
}

void Profile::traceReady() {
  if (options_.onTraceReady) options_.onTraceReady(*this);
}

void Profile::step() {
  KILN_CHECK(running_, "profiler: step() of a profile that is not running");
  const Action now = action(stepNum_);
  const int64_t end = nowNs();
  if ((now == Action::record || now == Action::recordAndSave) && (recordingFlags() & kCpu)) {
    TraceEvent marker;
    marker.name = fmt::format("ProfilerStep#{}", stepNum_);
    marker.category = "step";
    marker.startNs = stepStartNs_;
    marker.endNs = end;
    record(std::move(marker));
  }
  const Action next = action(stepNum_ + 1);
  if (now == Action::recordAndSave) {
    setFlags(0);
    events_ = drain();
    traceReady();
  } else if (now == Action::warmup && next != Action::warmup) {
    (void)drain();  // warm-up steps are recorded and dropped
  }
  stepNum_++;
  setFlags(next == Action::none ? 0 : recordingFlags());
  stepStartNs_ = nowNs();
}

void Profile::stop() {
  KILN_CHECK(running_, "profiler: stop() of a profile that is not running");
  const Action now = action(stepNum_);
  setFlags(0);
  running_ = false;
  std::vector<TraceEvent> events = drain();
  release();
  // Without a schedule, start() to stop() is the trace; with one, the
  // active steps of a cycle stop() cut short.
  if (now == Action::record || now == Action::recordAndSave) {
    if (options_.schedule && (recordingFlags() & kCpu)) {
      TraceEvent marker;
      marker.name = fmt::format("ProfilerStep#{}", stepNum_);
      marker.category = "step";
      marker.startNs = stepStartNs_;
      marker.endNs = nowNs();
      marker.thread = threadId();
      events.insert(std::lower_bound(events.begin(), events.end(), marker,
                                     [](const TraceEvent& a, const TraceEvent& b) { return a.startNs < b.startNs; }),
                    std::move(marker));
    }
    events_ = std::move(events);
    traceReady();
  }
}

void Profile::exportChromeTrace(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(out.good(), "profiler: cannot write the trace to {}", path);
  out << chromeTrace();
  out.close();
  KILN_CHECK(out.good(), "profiler: writing the trace to {} failed", path);
}

std::string Profile::chromeTrace() const { return chromeTraceJson(events_); }

KeyAverages Profile::keyAverages() const { return keyAveragesOf(events_); }

}  // namespace kiln::profiler
