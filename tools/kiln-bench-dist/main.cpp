// kiln-bench-dist: the distributed suite (docs/benchmarks.md, "Several
// processes"). As launched by a user it is the launcher: for each process
// count it serves a TCP store on 127.0.0.1, starts that many copies of
// itself in --dist-worker mode (launch.h) and reads rank 0's rows; then
// torch.distributed's side when PyTorch is importable; then prints the
// tables and writes --json. As a rank (--dist-worker) it measures
// (worker.h).
//
//   kiln-bench-dist [--nprocs 2,4] [--max-bytes 256MiB] [--json FILE] ...
//
// Progress goes to stderr, the tables to stdout.
#include <fmt/format.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "runtime/error.h"
#include "tools/kiln-bench-dist/launch.h"
#include "tools/kiln-bench-dist/options.h"
#include "tools/kiln-bench-dist/report.h"
#include "tools/kiln-bench-dist/torch_side.h"
#include "tools/kiln-bench-dist/worker.h"

namespace {

using namespace kiln::bench::dist;

/// A directory for the ranks' result files, removed at the end.
class WorkDir {
 public:
  WorkDir() {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "kiln-bench-dist-XXXXXX").string();
    KILN_CHECK(mkdtemp(pattern.data()) != nullptr, "kiln-bench-dist: cannot make a directory {}", pattern);
    dir_ = pattern;
  }
  ~WorkDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string str() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

nlohmann::json readRows(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(static_cast<bool>(in), "kiln-bench-dist: rank 0 wrote no result ({})", path);
  return nlohmann::json::parse(in);
}

int launch(const Options& options) {
  std::optional<std::ofstream> json;
  if (options.jsonPath) {
    json.emplace(*options.jsonPath);
    if (!*json) throw UsageError(fmt::format("--json: cannot open '{}' for writing", *options.jsonPath));
  }
  kiln::run::SignalWatcher signals;  // before any thread: every thread inherits the blocked signals
  WorkDir work;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  TorchInfo torch;
  if (options.torch) {
    torch = probeTorch(options, work.str(), signals);
    std::cerr << (torch.available() ? fmt::format("kiln-bench-dist: torch {}\n", torch.version)
                                    : fmt::format("kiln-bench-dist: {}\n", torch.error));
  } else {
    torch.error = "torch not compared: --no-torch";
  }
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json torchRows = nlohmann::json::object();
  for (const int n : options.nprocs) {
    const std::string result = work.path(fmt::format("allreduce-{}.json", n));
    Job job;
    job.what = fmt::format("all-reduce at {} processes", n);
    job.command = workerCommand(options, self, "allreduce", result);
    job.nprocs = n;
    job.timeout = std::chrono::seconds(options.timeoutS);
    runJob(job, signals);
    for (auto& r : readRows(result)) rows.push_back(r);
    if (!torch.available()) continue;
    try {
      torchRows[std::to_string(n)] = runTorch(options, n, work.str(), signals);
    } catch (const kiln::Error& e) {
      std::cerr << fmt::format("kiln-bench-dist: warning: {}\n", e.what());
      torchRows[std::to_string(n)] = {{"error", e.what()}};
    }
  }
  for (const int n : options.ddpNprocs) {
    const std::string result = work.path(fmt::format("ddp-{}.json", n));
    Job job;
    job.what = fmt::format("DDP at {} processes", n);
    job.command = workerCommand(options, self, "ddp", result);
    job.nprocs = n;
    job.timeout = std::chrono::seconds(options.timeoutS);
    runJob(job, signals);
    for (auto& r : readRows(result)) rows.push_back(r);
  }
  addComparisons(rows, torch, torchRows);
  const std::string machine = machineLine();
  for (auto& r : rows) r["machine"] = machine;
  printTables(std::cout, rows, machine, torch);
  std::cout.flush();
  if (json) {
    *json << rows.dump(1) << "\n";
    json->close();
    if (!*json) {
      std::cerr << fmt::format("kiln-bench-dist: error: cannot write {}\n", *options.jsonPath);
      return 1;
    }
  }
  return 0;
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
    if (!options.workerMode.empty()) return runWorker(options);
    return launch(options);
  } catch (const UsageError& e) {
    std::cerr << "kiln-bench-dist: " << e.what() << "\n"
              << "try 'kiln-bench-dist --help'\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kiln-bench-dist: error: " << e.what() << "\n";
    return 1;
  }
}
