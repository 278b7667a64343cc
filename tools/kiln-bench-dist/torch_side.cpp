// The torch.distributed side of kiln-bench-dist (torch_side.h).
#include "tools/kiln-bench-dist/torch_side.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/error.h"

namespace kiln::bench::dist {

namespace {

std::string python() {
  const char* p = std::getenv("KILN_TORCH_PYTHON");
  return p && *p ? p : "python3";
}

std::string script() { return (std::filesystem::path(selfDir()) / "kiln-bench-dist-torch.py").string(); }

nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(static_cast<bool>(in), "kiln-bench-dist: {} was not written", path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("kiln-bench-dist: {} is not JSON: {}", path, e.what());
  }
}

}  // namespace

std::string selfDir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

TorchInfo probeTorch(const Options& options, const std::string& workDir, run::SignalWatcher& signals) {
  TorchInfo info;
  if (!std::filesystem::exists(script())) {
    info.error = fmt::format("torch not importable: the script {} is missing", script());
    return info;
  }
  const std::string result = (std::filesystem::path(workDir) / "torch-probe.json").string();
  Job job;
  job.what = "the torch probe";
  job.command = {python(), script(), "--probe", "--result", result};
  job.nprocs = 1;
  job.serveStore = false;
  job.timeout = std::chrono::seconds(std::min(options.timeoutS, 120));
  try {
    runJob(job, signals);
    const nlohmann::json j = readJson(result);
    if (j.contains("error") && j["error"].is_string())
      info.error = j["error"].get<std::string>();
    else
      info.version = j.value("torch", std::string("unknown"));
  } catch (const Error& e) {
    info.error = fmt::format("torch not importable: {} did not run: {}", python(), e.what());
  }
  return info;
}

nlohmann::json runTorch(const Options& options, int nprocs, const std::string& workDir, run::SignalWatcher& signals) {
  std::string sizeList, iterList;
  for (int64_t b : sizes(options)) {
    sizeList += fmt::format("{}{}", sizeList.empty() ? "" : ",", b);
    iterList += fmt::format("{}{}", iterList.empty() ? "" : ",", itersFor(options, b));
  }
  const std::string result = (std::filesystem::path(workDir) / fmt::format("torch-{}.json", nprocs)).string();
  Job job;
  job.what = fmt::format("torch.distributed all-reduce at {} processes", nprocs);
  job.command = {python(),    script(),
                 "--result",  result,
                 "--sizes",   sizeList,
                 "--iters",   iterList,
                 "--warmup",  std::to_string(options.warmup),
                 "--timeout", std::to_string(options.callTimeoutS)};
  job.nprocs = nprocs;
  job.serveStore = false;
  job.timeout = std::chrono::seconds(options.timeoutS);
  if (!std::getenv("OMP_NUM_THREADS")) job.env["OMP_NUM_THREADS"] = "1";  // torchrun's, several processes a node
  runJob(job, signals);
  return readJson(result);
}

}  // namespace kiln::bench::dist
