// kiln-bench-dist's output (tools/kiln-bench-dist/report.h).
#include "tools/kiln-bench-dist/report.h"

#include "tools/common/machine.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "tools/kiln-bench-dist/timing.h"

namespace kiln::bench::dist {

namespace {

double number(const nlohmann::json& row, const std::string& key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : std::nan("");
}

/// Whether `row` is a row of the kind `name` ("all_reduce", "ddp_step").
bool is(const nlohmann::json& row, const char* name) {
  const auto it = row.find("name");
  return it != row.end() && it->is_string() && it->get_ref<const std::string&>() == name;
}

nlohmann::json ratio(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b) || b <= 0) return nullptr;
  return a / b;
}

std::string cell(double v, const char* spec = "{:.3f}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : std::string("-");
}

std::string sizeText(int64_t b) {
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

}  // namespace

std::string machineLine() {
  const std::string cpu = tools::cpuModelName();
  return fmt::format("{} cores{}, loopback", std::thread::hardware_concurrency(), cpu.empty() ? "" : " (" + cpu + ")");
}

void addComparisons(nlohmann::json& rows, const TorchInfo& torch, const nlohmann::json& torchRowsByProcesses) {
  for (auto& row : rows) {
    if (!is(row, "all_reduce")) continue;
    const int n = row["processes"].get<int>();
    const int64_t bytes = row["bytes"].get<int64_t>();
    double torchMs = std::nan("");
    std::string torchError = torch.error;
    if (torch.available()) {
      const std::string key = std::to_string(n);
      if (torchRowsByProcesses.contains(key)) {
        const nlohmann::json& t = torchRowsByProcesses[key];
        if (t.contains("error")) torchError = t["error"].get<std::string>();
        for (const auto& tr : t.value("rows", nlohmann::json::array()))
          if (tr["bytes"].get<int64_t>() == bytes) torchMs = tr["ms"].get<double>();
      }
    }
    const double torchBus = std::isfinite(torchMs) ? algbwGbps(bytes, torchMs) * 2.0 * (n - 1) / n : std::nan("");
    row["torch_ms"] = std::isfinite(torchMs) ? nlohmann::json(torchMs) : nlohmann::json(nullptr);
    row["torch_busbw_gbps"] = std::isfinite(torchBus) ? nlohmann::json(torchBus) : nlohmann::json(nullptr);
    row["torch_version"] = torch.version.empty() ? nlohmann::json(nullptr) : nlohmann::json(torch.version);
    row["torch_error"] = torchError.empty() ? nlohmann::json(nullptr) : nlohmann::json(torchError);
    const double kiln = number(row, "kiln_busbw_gbps"), off = number(row, "kiln_debug_off_busbw_gbps");
    row["kiln_gloo_ratio"] = ratio(kiln, number(row, "gloo_busbw_gbps"));
    row["kiln_debug_off_gloo_ratio"] = ratio(off, number(row, "gloo_busbw_gbps"));
    row["kiln_gloo_allreduce_ratio"] = ratio(kiln, number(row, "gloo_allreduce_busbw_gbps"));
    row["kiln_torch_ratio"] = ratio(kiln, torchBus);
  }
}

void printTables(std::ostream& os, const nlohmann::json& rows, const std::string& machine, const TorchInfo& torch) {
  os << fmt::format(
      "kiln-bench-dist: {}; f32 all-reduce (sum); medians of the slowest rank's time per call;\n"
      "busbw = bytes / time * 2(n-1)/n in GB/s; ratios are kiln's busbw over the other's\n",
      machine);
  if (!torch.available())
    os << fmt::format("torch: not compared: {}\n", torch.error);
  else
    os << fmt::format("torch: {} (torch.distributed, gloo, in processes of its own after kiln's)\n", torch.version);
  bool allReduce = false;
  for (const auto& r : rows) allReduce = allReduce || is(r, "all_reduce");
  if (allReduce)
    os << "\n| procs | size | kiln ms | kiln busbw | debug off ms | debug off busbw | gloo ms | gloo busbw | "
          "gloo::allreduce busbw | torch busbw | kiln/gloo | debug off/gloo | kiln/torch |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    if (!is(r, "all_reduce")) continue;
    os << fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r["processes"].get<int>(),
        sizeText(r["bytes"].get<int64_t>()), cell(number(r, "kiln_ms")), cell(number(r, "kiln_busbw_gbps")),
        cell(number(r, "kiln_debug_off_ms")), cell(number(r, "kiln_debug_off_busbw_gbps")), cell(number(r, "gloo_ms")),
        cell(number(r, "gloo_busbw_gbps")), cell(number(r, "gloo_allreduce_busbw_gbps")),
        cell(number(r, "torch_busbw_gbps")), cell(number(r, "kiln_gloo_ratio"), "{:.2f}"),
        cell(number(r, "kiln_debug_off_gloo_ratio"), "{:.2f}"), cell(number(r, "kiln_torch_ratio"), "{:.2f}"));
  }
  bool ddp = false;
  for (const auto& r : rows) ddp = ddp || is(r, "ddp_step");
  if (!ddp) return;
  auto yesNo = [](const nlohmann::json& v) { return v.is_boolean() ? (v.get<bool>() ? "yes" : "no") : "-"; };
  os << "\n| procs | MLP | step ms | compute ms | communication ms | compute + communication ms | overlapped | "
        "compiled step ms | compiled compute ms | compiled overlapped |\n"
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---|\n";
  for (const auto& r : rows) {
    if (!is(r, "ddp_step")) continue;
    os << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r["processes"].get<int>(),
                      r["mlp"].get<std::string>(), cell(number(r, "step_ms")), cell(number(r, "compute_ms")),
                      cell(number(r, "communication_ms")), cell(number(r, "compute_plus_communication_ms")),
                      yesNo(r["overlapped"]), cell(number(r, "compiled_step_ms")),
                      cell(number(r, "compiled_compute_ms")), yesNo(r["compiled_overlapped"]));
  }
  for (const auto& r : rows) {
    if (!is(r, "ddp_step") || !r["overlapped"].is_boolean()) continue;
    for (const char* prefix : {"", "compiled_"}) {
      const bool yes = r[std::string(prefix) + "overlapped"].get<bool>();
      os << fmt::format("DDP at {} processes{}: step {} ms {} compute {} ms + communication {} ms = {} ms: {}\n",
                        r["processes"].get<int>(), *prefix ? ", compiled" : "",
                        cell(number(r, std::string(prefix) + "step_ms")), yes ? "<" : ">=",
                        cell(number(r, std::string(prefix) + "compute_ms")), cell(number(r, "communication_ms")),
                        cell(number(r, std::string(prefix) + "compute_plus_communication_ms")),
                        yes ? "communication overlapped" : "communication not overlapped");
    }
  }
}

}  // namespace kiln::bench::dist
