// The table and the JSON of report.h. Columns are documented in
// docs/benchmarks.md; a new column goes in both outputs and there.
#include "tools/kiln-bench/report.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>

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

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

void printTable(std::ostream& os, const Machine& machine, const std::vector<Result>& results) {
  std::string copies;
  for (const Machine::Copy& c : machine.copies)
    copies += fmt::format("{}{:.1f} GB/s ({} buffer, median of {} copies)", copies.empty() ? "" : "; ", c.gbps,
                          mib(c.bytes), c.samples);
  os << fmt::format("machine: {}{} threads, copy bandwidth (read+write) {}\n",
                    machine.cpu.empty() ? "" : machine.cpu + ", ", machine.threads, copies.empty() ? "n/a" : copies);
  if (!machine.blas.empty()) os << fmt::format("blas: {}\n", machine.blas);
  os << fmt::format("{:<12} {:>10} {:>11} {:>8} {:>10} {:>13} {:>9} {:>9} {:>13} {:>16} {:>10} {:>13} {:>16}\n",
                    "workload", "eager ms", "compiled ms", "speedup", "eager GB/s", "compiled GB/s", "copy GB/s",
                    "% of copy", "kernels eager", "kernels compiled", "compile ms", "eager GFLOP/s",
                    "compiled GFLOP/s");
  auto gflops = [](const Result& r, double v) { return r.flops > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
  for (const Result& r : results) {
    os << fmt::format(
        "{:<12} {:>10.2f} {:>11.2f} {:>7.2f}x {:>10.2f} {:>13.2f} {:>9.2f} {:>8.1f}% {:>13} {:>16} {:>10.1f} {:>13} "
        "{:>16}{}\n",
        r.name, r.eagerMs, r.compiledMs, r.speedup(), r.eagerGbps(), r.compiledGbps(), r.copyGbps, r.percentOfCopy(),
        r.kernelsEager, r.kernelsCompiled, r.compileMs, gflops(r, r.eagerGflops()), gflops(r, r.compiledGflops()),
        r.matches ? "" : "  MISMATCH");
  }
}

std::string toJson(const Machine& machine, const std::vector<Result>& results) {
  std::string out = "[";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
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
    field("copy_bytes", std::to_string(r.copyBytes));
    field("percent_of_copy", num(r.percentOfCopy()));
    field("kernels_eager", std::to_string(r.kernelsEager));
    field("kernels_compiled", std::to_string(r.kernelsCompiled));
    field("compile_ms", num(r.compileMs));
    field("kernel_compile_ms", num(r.kernelCompileMs));
    field("eager_first_ms", num(r.eagerFirstMs));
    field("input_bytes", std::to_string(r.inputBytes));
    field("output_bytes", std::to_string(r.outputBytes));
    field("eager_runs", std::to_string(r.eagerRuns));
    field("compiled_runs", std::to_string(r.compiledRuns));
    field("flops", num(r.flops));
    field("eager_gflops", r.flops > 0 ? num(r.eagerGflops()) : "null");
    field("compiled_gflops", r.flops > 0 ? num(r.compiledGflops()) : "null");
    field("matches_eager", r.matches ? "true" : "false");
    field("threads", std::to_string(machine.threads));
    field("cpu", str(machine.cpu));
    field("blas", str(machine.blas));
    out += "}";
  }
  return out + (results.empty() ? "]\n" : "\n]\n");
}

}  // namespace kiln::bench
