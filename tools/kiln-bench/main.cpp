// kiln-bench: eager against compiled on the CPU, with the machine's copy
// bandwidth measured in the same run as the yardstick (DESIGN.md §11).
//
//   kiln-bench [--filter REGEX] [--repeats N] [--json FILE] [--compare-torch]
//
// Progress goes to stderr, the table to stdout. See docs/benchmarks.md.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>

#include "codegen/blas_choice.h"
#include "frontend/profiler.h"
#include "runtime/blas.h"
#include "runtime/device_interface.h"
#include "runtime/thread_pool.h"
#include "tools/common/machine.h"
#include "tools/kiln-bench/loader_suite.h"
#include "tools/kiln-bench/measure.h"
#include "tools/kiln-bench/options.h"
#include "tools/kiln-bench/report.h"
#include "tools/kiln-bench/torch_compare.h"
#include "tools/kiln-bench/workload.h"

namespace {

using namespace kiln::bench;

std::vector<const Workload*> select(const Options& options) {
  std::vector<const Workload*> out;
  std::optional<std::regex> re;
  if (options.filter) {
    try {
      re.emplace(*options.filter);
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("--filter: invalid regular expression '{}': {}", *options.filter, e.what()));
    }
  }
  // A filter, and --list, choose among every workload; otherwise the suite
  // does (kernels: those of the default run).
  const bool every = options.list || options.suite == "all";
  for (const Workload& w : workloads())
    if (re ? std::regex_search(w.name, *re) : every || w.inDefaultRun) out.push_back(&w);
  if (out.empty())
    throw UsageError(fmt::format("--filter '{}' matches no workload (see --list)", options.filter.value_or("")));
  return out;
}

// Note [kiln-bench's kernel cache]: compile times are measured cold (no
// kernel cached anywhere) and from the disk cache, so kiln-bench keeps its
// kernels in a directory of its own, made fresh for the run and removed at
// its end: emptying it between workloads (runWorkload) never touches the
// user's ~/.cache/kiln, and no earlier run makes a cold compile warm.
class PrivateKernelCache {
 public:
  PrivateKernelCache() {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "kiln-bench-cache-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error(fmt::format("cannot make a kernel cache directory {}", pattern));
    dir_ = pattern;
    setenv("KILN_CACHE_DIR", dir_.c_str(), 1);  // before the disk cache's first use
  }
  ~PrivateKernelCache() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PrivateKernelCache(const PrivateKernelCache&) = delete;
  PrivateKernelCache& operator=(const PrivateKernelCache&) = delete;

 private:
  std::filesystem::path dir_;
};

int run(const Options& options) {
  std::vector<const Workload*> selected = select(options);
  if (options.list) {
    size_t width = 12;
    for (const Workload* w : selected) width = std::max(width, w->name.size());
    for (const Workload* w : selected) std::cout << fmt::format("{:<{}} {}\n", w->name, width, w->description);
    return 0;
  }

  // Open the JSON file first: a bad path should fail before the run, not after.
  std::optional<std::ofstream> json;
  if (options.jsonPath) {
    json.emplace(*options.jsonPath);
    if (!*json) throw UsageError(fmt::format("--json: cannot open '{}' for writing", *options.jsonPath));
  }

  Machine machine;
  machine.cpu = kiln::tools::cpuModelName();
  machine.compiledFor = kiln::tools::compiledForText();
  machine.threads = kiln::runtime::ThreadPool::instance().numThreads();
  RunPolicy policy;
  policy.repeats = options.repeats;
  policy.device = kiln::Device::parse(options.device);
  policy.replay = options.replay == "off"      ? kiln::runtime::GraphReplay::off
                  : options.replay == "always" ? kiln::runtime::GraphReplay::always
                                               : kiln::runtime::GraphReplay::cheaper;
  {
    std::string why;
    if (!kiln::runtime::isDeviceAvailable(policy.device, &why))
      throw std::runtime_error(fmt::format("--device {}: the device cannot be used: {}", policy.device.str(), why));
    const kiln::runtime::DeviceProperties& p = kiln::runtime::deviceInterface(policy.device).properties();
    machine.device = policy.device.isCpu()
                         ? "cpu"
                         : fmt::format("{} ({}, driver {}, {} compute units, {:.1f} GiB)", policy.device.str(), p.name,
                                       p.driverVersion, p.computeUnits, static_cast<double>(p.totalMemory) / (1 << 30));
  }
  // The machine's BLAS, from the user's disk cache (Note [Choosing the
  // BLAS]), before the kernel cache becomes kiln-bench's own.
  const kiln::codegen::BlasChoice& blas = kiln::codegen::cpuBlasChoice();
  machine.blas = fmt::format("{}, threads: {}; chosen: {}; bf16 products: {}", kiln::runtime::blasInfo(),
                             kiln::runtime::blasThreading() == kiln::runtime::BlasThreading::pool
                                 ? "kiln's pool (KILN_BLAS_THREADING=pool)"
                                 : "the BLAS's own (KILN_BLAS_THREADING=blas)",
                             blas.how, blas.halfHow);
  if (options.convBenchmark) kiln::backends::setBenchmark(true);
  machine.conv = fmt::format(
      "{}, default {} on 64x56x56 3x3",
      options.convBenchmark ? "each distinct call measured (--conv-benchmark)" : "default algorithms, unmeasured",
      kiln::tools::typicalConvAlgorithm());
  PrivateKernelCache kernelCache;
  // PyTorch is started before kiln measures anything (importing torch takes
  // seconds of CPU) and measures each workload after kiln has, so that the
  // two never run at once.
  std::optional<TorchSide> torch;
  if (options.compareTorch) {
    std::cerr << "kiln-bench: starting the PyTorch side\n";
    torch.emplace(machine.threads, policy, options.torchCompile);
    machine.torch = torch->info();
    if (!torch->available())
      std::cerr << fmt::format("kiln-bench: PyTorch unavailable, comparing nothing: {}\n", torch->info().unavailable);
  }
  // --profile: kiln's side only (PyTorch runs in another process).
  std::optional<kiln::profiler::Profile> profile;
  if (options.profilePath) {
    kiln::profiler::ProfileOptions o;
    o.recordShapes = true;
    profile.emplace(std::move(o));
    profile->start();
  }
  std::vector<Result> results;
  for (const Workload* w : selected) {
    std::cerr << fmt::format("kiln-bench: running {}\n", w->name);
    results.push_back(runWorkload(*w, policy));
    if (torch && torch->available()) {
      std::cerr << fmt::format("kiln-bench: running {} in PyTorch\n", w->name);
      results.back().torch = torch->run(w->name, w->inputTypes);
    }
  }
  if (profile) {
    profile->stop();
    profile->exportChromeTrace(*options.profilePath);
    std::cerr << profile->keyAverages().table("self_cpu_time_total", 20);
    std::cerr << fmt::format("kiln-bench: wrote the profile ({} events) to {}\n", profile->events().size(),
                             *options.profilePath);
  }
  const std::string torchLost = torch ? torch->lost() : "";
  torch.reset();  // the script exits
  // The header's copy bandwidth: every copy of the run, per buffer size.
  std::map<int64_t, std::vector<double>> copies;
  for (const Result& r : results)
    copies[r.copyBytes].insert(copies[r.copyBytes].end(), r.copySamplesGbps.begin(), r.copySamplesGbps.end());
  for (const auto& [bytes, gbps] : copies)
    machine.copies.push_back({bytes, median(gbps), static_cast<int>(gbps.size())});

  printTable(std::cout, machine, results);
  std::cout.flush();
  if (json) {
    *json << toJson(machine, results);
    json->close();
    if (!*json) {
      std::cerr << fmt::format("kiln-bench: error: cannot write {}\n", *options.jsonPath);
      return 1;
    }
  }
  int status = 0;
  if (!torchLost.empty()) {
    std::cerr << fmt::format("kiln-bench: warning: {}\n", torchLost);
    status = 1;
  }
  for (const Result& r : results) {
    if (r.matches) continue;
    std::cerr << fmt::format("kiln-bench: warning: {}: compiled output differs from eager: {}\n", r.name, r.mismatch);
    status = 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
    if (options.help) {
      std::cout << usage();
      return 0;
    }
    if (options.suite == "loader") return runLoaderSuite(options, std::cout);
    return run(options);
  } catch (const UsageError& e) {
    std::cerr << "kiln-bench: " << e.what() << "\n"
              << "try 'kiln-bench --help'\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kiln-bench: error: " << e.what() << "\n";
    return 1;
  }
}
