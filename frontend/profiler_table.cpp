// keyAverages() (frontend/profiler.h): a profile's events grouped by name,
// with self times from the nesting of ranges on each thread, and the table
// torch.profiler's key_averages().table() prints.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "frontend/profiler.h"
#include "runtime/error.h"

namespace kiln::profiler {

namespace {

double usOf(const TraceEvent& e) { return static_cast<double>(e.endNs - e.startNs) / 1000.0; }

std::string timeStr(double us) {
  if (us >= 1e6) return fmt::format("{:.3f}s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f}ms", us / 1e3);
  return fmt::format("{:.3f}us", us);
}

double keyOf(const KeyAverage& r, std::string_view sortBy) {
  if (sortBy == "cpu_time_total") return r.cpuTimeTotal;
  if (sortBy == "self_cpu_time_total") return r.selfCpuTimeTotal;
  if (sortBy == "device_time_total" || sortBy == "cuda_time_total") return r.deviceTimeTotal;
  if (sortBy == "self_device_time_total" || sortBy == "self_cuda_time_total") return r.selfDeviceTimeTotal;
  if (sortBy == "count") return static_cast<double>(r.count);
  throw Error(
      fmt::format("profiler: cannot sort by '{}': expected cpu_time_total, self_cpu_time_total, "
                  "device_time_total, self_device_time_total or count",
                  sortBy));
}

}  // namespace

KeyAverages keyAveragesOf(const std::vector<TraceEvent>& events) {
  std::map<std::string, KeyAverage> rows;
  auto row = [&](const std::string& name) -> KeyAverage& {
    KeyAverage& r = rows[name];
    r.name = name;
    return r;
  };
  std::unordered_map<uint64_t, double> kernelUs;  // correlation -> the kernel's device time
  for (const TraceEvent& e : events) {
    if (e.kind != EventKind::kernel) continue;
    KeyAverage& r = row(e.name);
    r.count++;
    r.deviceTimeTotal += usOf(e);
    r.selfDeviceTimeTotal += usOf(e);
    r.bytesMoved += e.bytes;
    if (e.correlation) kernelUs[e.correlation] += usOf(e);
  }
  // Per thread, ranges in order of start (enclosing first): a stack of the
  // open ones gives each its parent, whose self time loses the child's.
  std::map<uint32_t, std::vector<const TraceEvent*>> threads;
  for (const TraceEvent& e : events)
    if (e.kind == EventKind::range) threads[e.thread].push_back(&e);
  for (auto& [thread, ranges] : threads) {
    std::stable_sort(ranges.begin(), ranges.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->startNs != b->startNs ? a->startNs < b->startNs : a->endNs > b->endNs;
    });
    std::vector<const TraceEvent*> open;
    for (const TraceEvent* e : ranges) {
      while (!open.empty() && open.back()->endNs < e->endNs) open.pop_back();  // ended before e: not its parent
      KeyAverage& r = row(e->name);
      r.count++;
      r.cpuTimeTotal += usOf(*e);
      r.selfCpuTimeTotal += usOf(*e);
      if (!open.empty()) row(open.back()->name).selfCpuTimeTotal -= usOf(*e);
      if (e->correlation) {
        if (auto it = kernelUs.find(e->correlation); it != kernelUs.end()) {
          r.deviceTimeTotal += it->second;
          for (const TraceEvent* parent : open) row(parent->name).deviceTimeTotal += it->second;
        }
      }
      open.push_back(e);
    }
  }
  std::vector<KeyAverage> out;
  for (auto& [name, r] : rows) out.push_back(std::move(r));
  return KeyAverages(std::move(out));
}

std::vector<KeyAverage> KeyAverages::sorted(std::string_view sortBy) const {
  (void)keyOf(KeyAverage{}, sortBy);  // an unknown key is an error even without rows
  std::vector<KeyAverage> out = rows_;
  std::stable_sort(out.begin(), out.end(),
                   [&](const KeyAverage& a, const KeyAverage& b) { return keyOf(a, sortBy) > keyOf(b, sortBy); });
  return out;
}

std::string KeyAverages::table(std::string_view sortBy, int rowLimit) const {
  const std::vector<KeyAverage> rows = sorted(sortBy);
  double selfCpu = 0, selfDevice = 0;
  for (const KeyAverage& r : rows) selfCpu += r.selfCpuTimeTotal, selfDevice += r.selfDeviceTimeTotal;
  size_t width = 4;
  const size_t shown = rowLimit < 0 ? rows.size() : std::min(rows.size(), static_cast<size_t>(rowLimit));
  for (size_t i = 0; i < shown; ++i) width = std::max(width, std::min<size_t>(rows[i].name.size(), 60));
  auto pct = [](double part, double whole) { return whole > 0 ? fmt::format("{:.2f}%", 100 * part / whole) : "-"; };
  const std::string rule(width + 2 + 13 * 6 + 9, '-');
  std::string out = rule + "\n";
  out += fmt::format("{:<{}}  {:>13}{:>13}{:>13}{:>13}{:>13}{:>13}{:>9}\n", "Name", width, "Self CPU %", "Self CPU",
                     "CPU total", "Self Device", "Device total", "GB/s", "# Calls");
  out += rule + "\n";
  for (size_t i = 0; i < shown; ++i) {
    const KeyAverage& r = rows[i];
    const std::string name = r.name.size() > width ? r.name.substr(0, width - 3) + "..." : r.name;
    const std::string gbs =
        r.bytesMoved > 0 && r.selfDeviceTimeTotal > 0
            ? fmt::format("{:.2f}", static_cast<double>(r.bytesMoved) / (r.selfDeviceTimeTotal * 1e-6) * 1e-9)
            : "";
    out += fmt::format("{:<{}}  {:>13}{:>13}{:>13}{:>13}{:>13}{:>13}{:>9}\n", name, width,
                       pct(r.selfCpuTimeTotal, selfCpu), timeStr(r.selfCpuTimeTotal), timeStr(r.cpuTimeTotal),
                       timeStr(r.selfDeviceTimeTotal), timeStr(r.deviceTimeTotal), gbs, r.count);
  }
  out += rule + "\n";
  out += fmt::format("Self CPU time total: {}\nSelf device time total: {}\n", timeStr(selfCpu), timeStr(selfDevice));
  return out;
}

}  // namespace kiln::profiler
