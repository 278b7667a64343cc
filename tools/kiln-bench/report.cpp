// The table and the JSON of report.h. Columns are documented in
// docs/benchmarks.md; a new column goes in both outputs and there.
#include "tools/kiln-bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <string_view>

namespace kiln::bench {

namespace {
std::string mib(int64_t bytes) { return fmt::format("{:g} MiB", static_cast<double>(bytes) / (1 << 20)); }

// A JSON number; NaN and infinities (a zero time, say) become null.
std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }

std::string str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}
}  // namespace


namespace {
// A table cell: "-" where there is no number (no compiled side, no
// PyTorch time).
std::string cell(double v, const char* spec = "{:.2f}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(spec), v) : std::string("-");
}

// Bytes as MiB, "-" when not measured (negative).
std::string mibCell(int64_t bytes) {
  return bytes < 0 ? std::string("-") : fmt::format("{:.2f}", static_cast<double>(bytes) / (1 << 20));
}

struct Column {
  const char* header;
  std::function<std::string(const Result&)> value;  ///< right-aligned under the header
};

std::vector<Column> columns(bool torch) {
  std::vector<Column> cols = {
      {"eager ms", [](const Result& r) { return cell(r.eagerMs); }},
      {"compiled ms", [](const Result& r) { return cell(r.compiledMs); }},
      {"speedup", [](const Result& r) { return cell(r.speedup(), "{:.2f}x"); }},
      {"eager GB/s", [](const Result& r) { return cell(r.eagerGbps()); }},
      {"compiled GB/s", [](const Result& r) { return cell(r.compiledGbps()); }},
      {"copy GB/s", [](const Result& r) { return cell(r.copyGbps); }},
      {"% of copy", [](const Result& r) { return cell(r.percentOfCopy(), "{:.1f}%"); }},
      {"kernels eager", [](const Result& r) { return std::to_string(r.kernelsEager); }},
      {"kernels compiled", [](const Result& r) { return r.hasCompiled ? std::to_string(r.kernelsCompiled) : "-"; }},
      {"peak MiB eager", [](const Result& r) { return mibCell(r.peakBytesEager); }},
      {"peak MiB compiled", [](const Result& r) { return mibCell(r.peakBytesCompiled); }},
      {"compile cold ms", [](const Result& r) { return cell(r.compileMs, "{:.1f}"); }},
      {"compile cached ms", [](const Result& r) { return cell(r.compileMsCached, "{:.1f}"); }},
      // Compute-bound workloads (Workload::flops) only.
      {"eager GFLOP/s", [](const Result& r) { return cell(r.flops > 0 ? r.eagerGflops() : NAN, "{:.1f}"); }},
      {"compiled GFLOP/s", [](const Result& r) { return cell(r.flops > 0 ? r.compiledGflops() : NAN, "{:.1f}"); }},
  };
  if (torch) {
    cols.push_back({"torch eager ms", [](const Result& r) { return cell(r.torch ? r.torch->eagerMs : NAN); }});
    cols.push_back({"torch compiled ms", [](const Result& r) { return cell(r.torch ? r.torch->compiledMs : NAN); }});
    cols.push_back({"kiln/torch eager", [](const Result& r) { return cell(r.eagerVsTorch(), "{:.2f}x"); }});
    cols.push_back({"kiln/torch compiled", [](const Result& r) { return cell(r.compiledVsTorch(), "{:.2f}x"); }});
  }
  return cols;
}
}  // namespace

namespace {
/// Graph replay's table, on a device that records: per workload, commands
/// per call and median ms, kernel by kernel and replayed.
void printReplay(std::ostream& os, const std::vector<Result>& results) {
  bool any = false;
  for (const Result& r : results) any = any || r.replayMeasured;
  if (!any) return;
  size_t width = std::string_view("workload").size();
  for (const Result& r : results) width = std::max(width, r.name.size());
  os << "\ngraph replay (compiled, on the device above; per call: commands enqueued, median ms)\n";
  os << fmt::format("{:<{}} {:>10} {:>10} {:>10} {:>10} {:>8}\n", "workload", width, "cmds", "cmds rep.", "ms",
                    "ms rep.", "ratio");
  for (const Result& r : results) {
    if (!r.replayMeasured) continue;
    if (!r.replayed) {
      os << fmt::format("{:<{}} {:>10} {:>10} {:>10} {:>10} {:>8}  not replayed: {}\n", r.name, width,
                        r.kernelsCompiledNoReplay, "-", cell(r.compiledNoReplayMs), "-", "-", r.replayOff);
      continue;
    }
    os << fmt::format("{:<{}} {:>10} {:>10} {:>10} {:>10} {:>7.2f}x\n", r.name, width, r.kernelsCompiledNoReplay,
                      r.kernelsCompiled, cell(r.compiledNoReplayMs), cell(r.compiledMs),
                      r.compiledNoReplayMs / r.compiledMs);
  }
}
}  // namespace

namespace {
/// The throughput table, for workloads that count items (images) per call
/// (Workload::itemsPerCall): items per second of each side, the batch over
/// the median time, and PyTorch's where it was measured.
void printThroughput(std::ostream& os, const std::vector<Result>& results, bool torch) {
  bool any = false;
  for (const Result& r : results) any = any || r.itemsPerCall > 0;
  if (!any) return;
  size_t width = std::string_view("workload").size();
  for (const Result& r : results) width = std::max(width, r.name.size());
  os << "\nthroughput (items per call; items/s: items over the median time)\n";
  std::string line =
      fmt::format("{:<{}} {:>8} {:>15} {:>18}", "workload", width, "items", "eager items/s", "compiled items/s");
  if (torch) line += fmt::format(" {:>21} {:>24}", "torch eager items/s", "torch compiled items/s");
  os << line << "\n";
  for (const Result& r : results) {
    if (r.itemsPerCall <= 0) continue;
    line = fmt::format("{:<{}} {:>8} {:>15} {:>18}", r.name, width, r.itemsPerCall, cell(r.eagerItemsPerSecond()),
                       cell(r.compiledItemsPerSecond()));
    if (torch) {
      const double items = static_cast<double>(r.itemsPerCall);
      line += fmt::format(" {:>21} {:>24}", cell(r.torch ? items * 1e3 / r.torch->eagerMs : NAN),
                          cell(r.torch ? items * 1e3 / r.torch->compiledMs : NAN));
    }
    os << line << "\n";
  }
}
}  // namespace

void printTable(std::ostream& os, const Machine& machine, const std::vector<Result>& results) {
  std::string copies;
  for (const Machine::Copy& c : machine.copies)
    copies += fmt::format("{}{:.1f} GB/s ({} buffer, median of {} copies)", copies.empty() ? "" : "; ", c.gbps,
                          mib(c.bytes), c.samples);
  os << fmt::format("machine: {}{} threads, copy bandwidth (read+write) {}\n",
                    machine.cpu.empty() ? "" : machine.cpu + ", ", machine.threads, copies.empty() ? "n/a" : copies);
  if (!machine.blas.empty()) os << fmt::format("blas: {}\n", machine.blas);
  if (!machine.conv.empty()) os << fmt::format("conv: {}\n", machine.conv);
  if (!machine.compiledFor.empty()) os << fmt::format("compiled for: {}\n", machine.compiledFor);
  if (machine.device != "cpu")
    os << fmt::format("device: {} (the copy bandwidth above is this device's)\n", machine.device);
  const bool torch = machine.torch && machine.torch->unavailable.empty();
  if (machine.torch) {
    const TorchInfo& t = *machine.torch;
    if (torch)
      os << fmt::format("torch: PyTorch {} ({}), {} threads,{} torch.compile {}\n", t.version, t.python, t.threads,
                        t.cpuCapability.empty() ? "" : " CPU kernels for " + t.cpuCapability + ",",
                        t.compile ? "tried per workload" : "off (--no-torch-compile)");
    else
      os << fmt::format("torch: not compared: {}\n", t.unavailable);
  }

  // The name column is as wide as the longest name.
  size_t width = std::string_view("workload").size();
  for (const Result& r : results) width = std::max(width, r.name.size());
  const std::vector<Column> cols = columns(torch);
  std::string line = fmt::format("{:<{}}", "workload", width);
  for (const Column& c : cols) line += fmt::format(" {}", c.header);
  os << line << "\n";
  for (const Result& r : results) {
    line = fmt::format("{:<{}}", r.name, width);
    for (const Column& c : cols) line += fmt::format(" {:>{}}", c.value(r), std::string_view(c.header).size());
    if (!r.hasCompiled)
      line += "  eager only";
    else if (!r.matches)
      line += "  MISMATCH";
    else if (r.tolerance > 0)
      line += fmt::format("  within {:g} of eager", r.tolerance);
    os << line << "\n";
  }
  printReplay(os, results);
  printThroughput(os, results, torch);
  // Why PyTorch has no number where it has none (torch.compile needs a C++
  // compiler, say); "disabled" is said once in the header.
  if (!torch) return;
  for (const Result& r : results) {
    if (!r.torch) continue;
    if (!r.torch->error.empty())
      os << fmt::format("torch: {}: {}\n", r.name, r.torch->error);
    else if (!r.torch->compileError.empty() && machine.torch->compile)
      os << fmt::format("torch: {}: torch.compile failed: {}\n", r.name, r.torch->compileError);
  }
}

std::string toJson(const Machine& machine, const std::vector<Result>& results) {
  std::string out = "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    auto count = [](int64_t v) { return std::to_string(v); };
    out += i ? ",\n  {" : "\n  {";
    auto field = [&, first = true](const char* key, const std::string& value) mutable {
      out += fmt::format("{}\"{}\": {}", first ? "" : ", ", key, value);
      first = false;
    };
    field("name", str(r.name));
    field("eager_ms", num(r.eagerMs));
    field("compiled_ms", num(r.compiledMs));
    field("speedup", num(r.speedup()));
    field("eager_gbps", num(r.eagerGbps()));
    field("compiled_gbps", num(r.compiledGbps()));
    field("copy_gbps", num(r.copyGbps));
    field("copy_bytes", count(r.copyBytes));
    field("percent_of_copy", num(r.percentOfCopy()));
    field("kernels_eager", count(r.kernelsEager));
    field("kernels_compiled", r.hasCompiled ? count(r.kernelsCompiled) : "null");
    field("compile_ms", num(r.compileMs));
    field("compile_ms_cold", num(r.compileMs));
    field("compile_ms_cached", num(r.compileMsCached));
    field("kernel_compile_ms_cached", num(r.kernelCompileMsCached));
    auto bytes = [](int64_t b) { return b < 0 ? std::string("null") : std::to_string(b); };
    field("peak_bytes_eager", bytes(r.peakBytesEager));
    field("peak_bytes_compiled", bytes(r.peakBytesCompiled));
    field("kernel_compile_ms", num(r.kernelCompileMs));
    field("eager_first_ms", num(r.eagerFirstMs));
    field("input_bytes", count(r.inputBytes));
    field("output_bytes", count(r.outputBytes));
    field("eager_runs", count(r.eagerRuns));
    field("compiled_runs", r.hasCompiled ? count(r.compiledRuns) : "null");
    field("flops", num(r.flops));
    field("eager_gflops", r.flops > 0 ? num(r.eagerGflops()) : "null");
    field("compiled_gflops", r.flops > 0 ? num(r.compiledGflops()) : "null");
    field("matches_eager", r.hasCompiled ? (r.matches ? "true" : "false") : "null");
    field("tolerance", num(r.tolerance));
    field("threads", std::to_string(machine.threads));
    field("cpu", str(machine.cpu));
    field("compiled_for", str(machine.compiledFor));
    field("device", str(machine.device));
    field("blas", str(machine.blas));
    field("conv", str(machine.conv));
    field("replayed", r.replayMeasured ? (r.replayed ? "true" : "false") : "null");
    field("compiled_no_replay_ms", num(r.compiledNoReplayMs));
    field("kernels_compiled_no_replay", r.replayMeasured ? count(r.kernelsCompiledNoReplay) : "null");
    field("replay_off", r.replayMeasured && !r.replayed ? str(r.replayOff) : "null");
    field("items_per_call", r.itemsPerCall > 0 ? count(r.itemsPerCall) : "null");
    field("eager_items_per_s", num(r.eagerItemsPerSecond()));
    field("compiled_items_per_s", num(r.compiledItemsPerSecond()));
    if (machine.torch) {
      const TorchInfo& t = *machine.torch;
      auto text = [](const std::string& s) { return s.empty() ? std::string("null") : str(s); };
      field("torch_version", text(t.version));
      field("torch_threads", t.unavailable.empty() ? std::to_string(t.threads) : "null");
      field("torch_cpu_capability", text(t.cpuCapability));
      const TorchResult none;
      const TorchResult& tr = r.torch ? *r.torch : none;
      field("torch_eager_ms", num(tr.eagerMs));
      field("torch_compiled_ms", num(tr.compiledMs));
      field("kiln_torch_eager_ratio", num(r.eagerVsTorch()));
      field("kiln_torch_compiled_ratio", num(r.compiledVsTorch()));
      field("torch_eager_first_ms", num(tr.eagerFirstMs));
      field("torch_compile_ms", num(tr.compileMs));
      field("torch_eager_runs", std::to_string(tr.eagerRuns));
      field("torch_compiled_runs", std::to_string(tr.compiledRuns));
      field("torch_error", text(r.torch ? tr.error : t.unavailable));
      field("torch_compile_error", text(r.torch ? tr.compileError : t.unavailable));
    }
    out += "}";
  }
  return out + (results.empty() ? "]\n" : "\n]\n");
}

}  // namespace kiln::bench
