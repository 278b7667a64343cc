// The Chrome trace of a profile (docs/profiler.md, "The trace"): the JSON
// object format of the Trace Event Format, which Perfetto and
// chrome://tracing load.
//
// Note [The trace's tracks]
// Process 1 is the host: one track (tid) per thread that recorded, in the
// order threads first recorded. Each device a kernel ran on or memory was
// allocated on is a process of its own (2, 3, ... in name order) with one
// track per stream (tid 1 the default stream, then others in order of
// first use). A launch (a host "X" event) and its kernel (an "X" event on
// the stream's track) are joined by a flow ("s" at the launch's start, "f"
// with "bp": "e" at the kernel's start, same "id": the launch's
// correlation), the form Kineto writes for CUDA kernels and Perfetto
// draws as an arrow. Memory events are instant events ("i") on the
// allocating thread, with bytes and the device's totals, and a counter
// ("C") per device. Times are microseconds from the trace's first event.
// No pid or tid is 0, which Perfetto treats as the kernel's idle task.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "frontend/profiler.h"

namespace kiln::profiler {

namespace {

using nlohmann::json;

constexpr int kHostPid = 1;

json argsOf(const TraceEvent& e) {
  json args = json::object();
  if (!e.shapes.empty() || !e.dtypes.empty()) {
    args["Input Dims"] = e.shapes;
    args["Input type"] = e.dtypes;
  }
  if (e.correlation) args["correlation"] = e.correlation;
  if (!e.device.empty()) args["device"] = e.device;
  if (!e.detail.empty()) args["detail"] = e.detail;
  if (e.kind == EventKind::kernel) {
    args["bytes moved"] = e.bytes;
    const double seconds = static_cast<double>(e.endNs - e.startNs) * 1e-9;
    args["GB/s"] = seconds > 0 ? static_cast<double>(e.bytes) / seconds * 1e-9 : 0.0;
  }
  return args;
}

}  // namespace

std::string chromeTraceJson(const std::vector<TraceEvent>& events) {
  int64_t base = 0;
  for (const TraceEvent& e : events) base = base == 0 ? e.startNs : std::min(base, e.startNs);
  auto us = [&](int64_t ns) { return static_cast<double>(ns - base) / 1000.0; };

  // Note [The trace's tracks]
  std::map<std::string, int> devicePid;
  std::map<std::pair<std::string, uint64_t>, int> streamTid;
  std::vector<uint32_t> threads;
  for (const TraceEvent& e : events) {
    if (e.kind == EventKind::range || e.kind == EventKind::memory)
      if (std::find(threads.begin(), threads.end(), e.thread) == threads.end()) threads.push_back(e.thread);
    if (e.kind != EventKind::range) devicePid.emplace(e.device, 0);
  }
  int nextPid = kHostPid + 1;
  for (auto& [device, pid] : devicePid) pid = nextPid++;
  std::map<std::string, int> nextTid;
  for (const TraceEvent& e : events) {
    if (e.kind != EventKind::kernel) continue;
    auto [it, fresh] = streamTid.try_emplace({e.device, e.stream}, 0);
    if (fresh) it->second = e.stream == 0 ? 1 : 2 + nextTid[e.device]++;
  }

  json out = json::array();
  out.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", kHostPid}, {"tid", 1}, {"args", {{"name", "kiln host"}}}});
  out.push_back(
      {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", kHostPid}, {"tid", 1}, {"args", {{"sort_index", 0}}}});
  for (uint32_t t : threads)
    out.push_back(
        {{"ph", "M"},
         {"name", "thread_name"},
         {"pid", kHostPid},
         {"tid", t},
         {"args", {{"name", t == 1 ? std::string("thread 1 (first to record)") : "thread " + std::to_string(t)}}}});
  for (const auto& [device, pid] : devicePid) {
    out.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", device}}}});
    out.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 1}, {"args", {{"sort_index", pid}}}});
  }
  for (const auto& [key, tid] : streamTid)
    out.push_back(
        {{"ph", "M"},
         {"name", "thread_name"},
         {"pid", devicePid.at(key.first)},
         {"tid", tid},
         {"args", {{"name", tid == 1 ? std::string("stream 0 (default)") : fmt::format("stream {}", tid - 1)}}}});

  std::map<uint64_t, const TraceEvent*> launches;  // correlation -> host launch
  for (const TraceEvent& e : events)
    if (e.kind == EventKind::range && e.correlation) launches.emplace(e.correlation, &e);

  for (const TraceEvent& e : events) {
    switch (e.kind) {
      case EventKind::range:
        out.push_back({{"ph", "X"},
                       {"name", e.name},
                       {"cat", e.category},
                       {"pid", kHostPid},
                       {"tid", e.thread},
                       {"ts", us(e.startNs)},
                       {"dur", static_cast<double>(e.endNs - e.startNs) / 1000.0},
                       {"args", argsOf(e)}});
        break;
      case EventKind::kernel: {
        const int pid = devicePid.at(e.device);
        const int tid = streamTid.at({e.device, e.stream});
        out.push_back({{"ph", "X"},
                       {"name", e.name},
                       {"cat", e.category},
                       {"pid", pid},
                       {"tid", tid},
                       {"ts", us(e.startNs)},
                       {"dur", static_cast<double>(e.endNs - e.startNs) / 1000.0},
                       {"args", argsOf(e)}});
        if (auto it = launches.find(e.correlation); it != launches.end()) {
          const TraceEvent& launch = *it->second;
          out.push_back({{"ph", "s"},
                         {"id", e.correlation},
                         {"name", "launch"},
                         {"cat", "ac2g"},
                         {"pid", kHostPid},
                         {"tid", launch.thread},
                         {"ts", us(launch.startNs)}});
          out.push_back({{"ph", "f"},
                         {"bp", "e"},
                         {"id", e.correlation},
                         {"name", "launch"},
                         {"cat", "ac2g"},
                         {"pid", pid},
                         {"tid", tid},
                         {"ts", us(e.startNs)}});
        }
        break;
      }
      case EventKind::memory:
        out.push_back({{"ph", "i"},
                       {"s", "t"},
                       {"name", e.name},
                       {"cat", e.category},
                       {"pid", kHostPid},
                       {"tid", e.thread},
                       {"ts", us(e.startNs)},
                       {"args",
                        {{"Device", e.device},
                         {"Bytes", e.bytes},
                         {"Total Allocated", e.totalAllocated},
                         {"Total Reserved", e.totalReserved}}}});
        out.push_back({{"ph", "C"},
                       {"name", "memory " + e.device},
                       {"pid", devicePid.at(e.device)},
                       {"tid", 1},
                       {"ts", us(e.startNs)},
                       {"args", {{"allocated", e.totalAllocated}, {"reserved", e.totalReserved}}}});
        break;
    }
  }
  json trace = {{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}, {"otherData", {{"producer", "kiln"}}}};
  return trace.dump();
}

}  // namespace kiln::profiler
