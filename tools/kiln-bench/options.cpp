// Parsing of kiln-bench's flags: `--flag value` or `--flag=value`.
#include "tools/kiln-bench/options.h"

#include <fmt/format.h>

#include <charconv>

#include "runtime/device.h"
#include "runtime/error.h"

namespace kiln::bench {

std::string usage() {
  return "usage: kiln-bench [--device DEVICE] [--filter REGEX] [--repeats N] [--json FILE]\n"
         "                  [--compare-torch [--no-torch-compile]] [--list] [--help]\n"
         "\n"
         "Runs each workload eagerly and compiled (kiln::compile) on a device and prints\n"
         "median times, speedup, effective bandwidth against the device's copy bandwidth\n"
         "measured in the same run, kernels per call and compile time. See docs/benchmarks.md.\n"
         "\n"
         "  --device DEVICE run on cpu (default), opencl[:N] or cuda[:N]\n"
         "  --filter REGEX  run the workloads whose name contains a match of REGEX (ECMAScript)\n"
         "  --repeats N     time exactly N calls of each side (default: 5 to 20 calls, about 1 s)\n"
         "  --json FILE     also write the results to FILE as a JSON array, one object per workload\n"
         "  --compare-torch run each workload in PyTorch too (eager and torch.compile), in the same\n"
         "                  run, under $KILN_TORCH_PYTHON (default python3); without torch it says\n"
         "                  so and prints kiln's columns\n"
         "  --no-torch-compile  with --compare-torch, skip torch.compile (it compiles for minutes)\n"
         "  --list          print the workloads and exit\n"
         "  --help          print this help and exit\n"
         "\n"
         "Exit status: 0 on success, 1 when a compiled result differs from eager or a run\n"
         "fails, 2 on a bad command line.\n";
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inlineValue;
    if (size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      inlineValue = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inlineValue) return *inlineValue;
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} expects a value", flag));
      return args[++i];
    };
    auto noValue = [&] {
      if (inlineValue) throw UsageError(fmt::format("{} takes no value", flag));
    };
    if (flag == "--help" || flag == "-h") {
      noValue();
      o.help = true;
    } else if (flag == "--list") {
      noValue();
      o.list = true;
    } else if (flag == "--compare-torch") {
      noValue();
      o.compareTorch = true;
    } else if (flag == "--no-torch-compile") {
      noValue();
      o.torchCompile = false;
    } else if (flag == "--device") {
      o.device = value();
      try {
        (void)Device::parse(o.device);
      } catch (const Error& e) {
        throw UsageError(fmt::format("--device: {}", e.what()));
      }
    } else if (flag == "--filter") {
      o.filter = value();
    } else if (flag == "--json") {
      o.jsonPath = value();
      if (o.jsonPath->empty()) throw UsageError("--json expects a file name");
    } else if (flag == "--repeats") {
      std::string v = value();
      int n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 1)
        throw UsageError(fmt::format("--repeats expects a positive integer, got '{}'", v));
      o.repeats = n;
    } else {
      throw UsageError(fmt::format("unknown argument '{}'", args[i]));
    }
  }
  if (!o.torchCompile && !o.compareTorch) throw UsageError("--no-torch-compile needs --compare-torch");
  return o;
}

}  // namespace kiln::bench
