// kiln-bench's command line.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::bench {

struct Options {
  std::optional<std::string> filter;  ///< std::regex searched in each workload name
  std::optional<std::string> jsonPath;
  std::optional<std::string> profilePath;  ///< --profile: a Chrome trace of the kiln side (docs/profiler.md)
  int repeats = 0;                 ///< timed calls per side; 0: adaptive (5 to 20 calls, about 1 s)
  bool compareTorch = false;       ///< also measure each workload in PyTorch (torch_compare.h)
  bool torchCompile = true;        ///< with compareTorch: also torch.compile each workload
  std::string device = "cpu";      ///< --device: cpu, opencl[:N], cuda[:N]
  std::string replay = "cheaper";  ///< --replay: the compiled side's CompileOptions::graphReplay
  bool convBenchmark = false;      ///< --conv-benchmark: kiln::backends::setBenchmark(true)
  /// --suite: kernels (the default run's workloads), all (every workload,
  /// the convolutional networks too), loader (loader_suite.h).
  std::string suite = "kernels";
  bool list = false;
  bool help = false;
};

/// A bad command line; main prints it and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses argv (without argv[0]). Throws UsageError.
Options parseOptions(const std::vector<std::string>& args);

/// The text of --help.
std::string usage();

}  // namespace kiln::bench
