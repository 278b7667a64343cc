// kiln-bench's command line, parsed by CLI11 (Debian libcli11-dev; the
// tools' command-line library, docs/architecture.md): `--flag value` or
// `--flag=value`, errors as UsageError.
#include "tools/kiln-bench/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "runtime/device.h"
#include "runtime/error.h"

namespace kiln::bench {

std::string usage() {
  return "usage: kiln-bench [--device DEVICE] [--replay MODE] [--filter REGEX] [--repeats N] [--json FILE]\n"
         "                  [--profile FILE] [--conv-benchmark]\n"
         "                  [--compare-torch [--no-torch-compile]] [--list] [--help]\n"
         "       kiln-bench --suite loader [--repeats N] [--json FILE]\n"
         "\n"
         "Runs each workload eagerly and compiled (kiln::compile) on a device and prints\n"
         "median times, speedup, effective bandwidth against the device's copy bandwidth\n"
         "measured in the same run, kernels per call and compile time. See docs/benchmarks.md.\n"
         "\n"
         "  --device DEVICE run on cpu (default), opencl[:N] or cuda[:N]\n"
         "  --replay MODE   graph replay of the compiled side on a device that records: cheaper\n"
         "                  (default: when it enqueues fewer commands), always, off; the replay\n"
         "                  table compares it with the program run kernel by kernel\n"
         "  --conv-benchmark  kiln::backends::setBenchmark(true): each convolution's first call times\n"
         "                  the algorithms and keeps the fastest (docs/convolution.md)\n"
         "  --filter REGEX  run the workloads whose name contains a match of REGEX (ECMAScript),\n"
         "                  out of every workload (those of --suite all too)\n"
         "  --repeats N     time exactly N calls of each side (default: 5 to 20 calls, about 1 s)\n"
         "  --json FILE     also write the results to FILE as a JSON array, one object per workload\n"
         "  --profile FILE  profile kiln's side of the run (kiln::profiler) and write its Chrome trace\n"
         "                  to FILE; the times measured while profiling include the profiler's cost\n"
         "  --compare-torch run each workload in PyTorch too (eager and torch.compile), in the same\n"
         "                  run and on the same kind of device, under $KILN_TORCH_PYTHON (default\n"
         "                  python3); without torch it says so and prints kiln's columns\n"
         "  --no-torch-compile  with --compare-torch, skip torch.compile (it compiles for minutes)\n"
         "  --suite SUITE   kernels (default: the workloads but the ResNet-18 ones, a minute more),\n"
         "                  all (every workload; scripts/bench.sh's default) or loader: DataLoader\n"
         "                  samples/s with a 1 ms transform at 0, 1 and 2 workers (docs/data.md);\n"
         "                  --repeats sets its epochs\n"
         "  --list          print every workload (or those --filter selects) and exit\n"
         "  --help          print this help and exit\n"
         "\n"
         "Exit status: 0 on success, 1 when a compiled result differs from eager or a run\n"
         "fails, 2 on a bad command line.\n";
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  CLI::App app("kiln-bench");
  app.set_help_flag();  // --help is an option of ours, printed by usage()
  app.allow_extras(false);
  std::string filter, json, profile;
  app.add_flag("--help,-h", o.help);
  app.add_flag("--list", o.list);
  app.add_flag("--compare-torch", o.compareTorch);
  bool noTorchCompile = false;
  app.add_flag("--no-torch-compile", noTorchCompile);
  app.add_flag("--conv-benchmark", o.convBenchmark);
  CLI::Option* filterOpt = app.add_option("--filter", filter);
  CLI::Option* jsonOpt = app.add_option("--json", json);
  CLI::Option* profileOpt = app.add_option("--profile", profile);
  app.add_option("--repeats", o.repeats)->check(CLI::PositiveNumber);
  app.add_option("--device", o.device);
  app.add_option("--suite", o.suite)->check(CLI::IsMember({"kernels", "all", "loader"}));
  app.add_option("--replay", o.replay)->check(CLI::IsMember({"cheaper", "always", "off"}));
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ExtrasError& e) {
    throw UsageError(fmt::format("unknown argument '{}'", app.remaining().empty() ? e.what() : app.remaining()[0]));
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  if (filterOpt->count()) o.filter = filter;
  if (jsonOpt->count()) {
    if (json.empty()) throw UsageError("--json expects a file name");
    o.jsonPath = json;
  }
  if (profileOpt->count()) {
    if (profile.empty()) throw UsageError("--profile expects a file name");
    o.profilePath = profile;
  }
  o.torchCompile = !noTorchCompile;
  try {
    (void)Device::parse(o.device);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--device: {}", e.what()));
  }
  if (o.suite == "loader" && (o.filter || o.compareTorch || o.list || o.device != "cpu"))
    throw UsageError("--suite loader takes --repeats and --json only");
  if (!o.torchCompile && !o.compareTorch) throw UsageError("--no-torch-compile needs --compare-torch");
  return o;
}

}  // namespace kiln::bench
