// Gathers kiln-env's report (collect.h). Every probe here is one kiln
// itself uses, so the report says what kiln will find, not what another
// tool would: the CUDA driver probe, NVRTC's loader, the CUDA library
// probes, NVML, the OpenCL compiler's device, and the device registry.
#include "tools/kiln-env/collect.h"

#include <fmt/format.h>
#include <gnu/libc-version.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "codegen/blas_choice.h"
#include "codegen/build_id.h"
#include "codegen/cpu_compiler.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen/opencl_compiler.h"
#include "runtime/blas.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_libraries.h"
#include "runtime/device.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/nvml.h"
#include "runtime/thread_pool.h"
#include "tools/common/machine.h"

extern char** environ;

namespace kiln::env {
namespace {

using nlohmann::json;

/// A number, or null where kiln's structs say "unknown" with a negative.
json known(double v) { return v < 0 ? json(nullptr) : json(v); }
json known(int64_t v) { return v < 0 ? json(nullptr) : json(v); }
/// Text, or null when empty: a reason when the thing is usable, a path or
/// version when it was not found.
json text(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "GCC " __VERSION__;
#else
  return "unknown";
#endif
}

/// The value of `key` in a file of "key<separator>value" lines, such as
/// /proc/cpuinfo (':') or /etc/os-release ('=', quoted); empty when absent.
std::string field(const char* path, const std::string& key, char separator) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(separator);
    if (at == std::string::npos || line.rfind(key, 0) != 0 || line.find_first_not_of(" \t", key.size()) != at) continue;
    std::string value = line.substr(at + 1);
    value.erase(0, std::min(value.find_first_not_of(" \t"), value.size()));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    return value;
  }
  return "";
}

json kilnBuild() {
  // cpuTargetDescription(): "LLVM 19.1.7 <triple> <cpu> <features>".
  const std::string target = codegen::cpuTargetDescription();
  std::vector<std::string> words;
  for (size_t at = 0; at < target.size() && words.size() < 4;) {
    const size_t end = std::min(target.find(' ', at), target.size());
    words.push_back(target.substr(at, end - at));
    at = end + 1;
  }
  words.resize(4);
  return {{"version", KILN_VERSION},
          {"build_id", text(codegen::codegenBuildId())},
          {"build_type", KILN_BUILD_TYPE},
          {"sanitizers", text(KILN_SANITIZERS)},
          {"compiler", compiler()},
          {"cxx_standard", __cplusplus},
          {"llvm", words[0] + " " + words[1]},
          {"target_triple", words[2]},
          {"target_cpu", words[3]}};
}

json system() {
  utsname u{};
  uname(&u);
  return {{"os", field("/etc/os-release", "PRETTY_NAME", '=')},
          {"kernel", fmt::format("{} {}", u.sysname, u.release)},
          {"machine", u.machine},
          {"glibc", gnu_get_libc_version()},
          {"cpu", field("/proc/cpuinfo", "model name", ':')},
          {"cores", std::thread::hardware_concurrency()}};
}

/// The typical convolution's algorithm, and KILN_CONV_ALGORITHM when set.
std::string convSummary() {
  const char* forced = std::getenv("KILN_CONV_ALGORITHM");
  return fmt::format("{} (64x56x56 3x3 f32{})", tools::typicalConvAlgorithm(),
                     forced && *forced ? fmt::format(", KILN_CONV_ALGORITHM={}", forced) : "");
}

json cpuSide() {
  codegen::cpuBlasChoice();  // the machine's BLAS (Note [Choosing the BLAS]), so that blasInfo() names it
  const bool pool = runtime::blasThreading() == runtime::BlasThreading::pool;
  return {{"threads", runtime::ThreadPool::instance().numThreads()},
          {"blas", runtime::blasInfo()},
          {"blas_choice", codegen::cpuBlasChoice().how},
          {"bf16_matmul_choice", codegen::cpuBlasChoice().halfHow},
          {"conv", convSummary()},
          {"blas_threading", pool ? "pool" : "blas"},
          {"compiled_for", tools::compiledForText()}};
}

json backends() {
  json out = json::object();
  const runtime::cuda::DriverProbe& driver = runtime::cuda::driver();
  out["cuda_driver"] = {{"available", driver.usable},
                        {"library", text(driver.library)},
                        {"version", driver.driverVersion > 0 ? json(fmt::format("{}.{}", driver.driverVersion / 1000,
                                                                                driver.driverVersion % 1000 / 10))
                                                             : json(nullptr)},
                        {"init_result", driver.initResult},
                        {"device_count", driver.deviceCount},
                        {"reason", text(driver.reason)}};
  std::string why;
  const bool nvrtc = codegen::nvrtcAvailable(&why);
  // The loader's own report names the file (kiln's NVRTC is the first
  // candidate that loads, so this finds the same one).
  const std::string nvrtcLibrary = nvrtc ? codegen::detail::loadNvrtc(codegen::detail::nvrtcCandidates()).library : "";
  out["nvrtc"] = {{"available", nvrtc},
                  {"library", text(nvrtcLibrary)},
                  {"version", nvrtc ? json(codegen::nvrtcVersion()) : json(nullptr)},
                  {"reason", text(why)}};
  for (runtime::cuda::Library library : runtime::cuda::kLibraries) {
    const runtime::cuda::LibraryProbe& p = runtime::cuda::probeLibrary(library);
    std::string key(runtime::cuda::libraryName(library));
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out[key] = {
        {"available", p.found}, {"library", text(p.path)}, {"version", text(p.version)}, {"reason", text(p.reason)}};
  }
  const runtime::nvml::Nvml& nvml = runtime::nvml::nvml();
  out["nvml"] = {{"available", nvml.available()},
                 {"library", text(nvml.library())},
                 {"driver_version", text(nvml.driverVersion())},
                 {"gpu_count", nvml.deviceCount()},
                 {"reason", text(nvml.reason())}};
  const bool opencl = codegen::openclAvailable(&why);
  out["opencl"] = {{"available", opencl},
                   {"device", opencl ? json(codegen::openclDeviceDescription()) : json(nullptr)},
                   {"reason", text(why)}};
  return out;
}

json deviceKinds() {
  json out = json::array();
  for (DeviceType type : {DeviceType::cpu, DeviceType::opencl, DeviceType::cuda}) {
    std::string why;
    const bool available = isAvailable(type, &why);
    out.push_back({{"kind", deviceTypeName(type)},
                   {"available", available},
                   {"count", available ? deviceCount(type) : 0},
                   {"reason", text(why)}});
  }
  return out;
}

json devices() {
  json out = json::array();
  for (Device d : kiln::devices()) {
    json entry = {{"device", d.str()}};
    try {
      const runtime::DeviceProperties& p = runtime::deviceInterface(d).properties();
      entry.update({{"name", p.name},
                    {"driver_version", p.driverVersion},
                    {"arch", text(p.arch)},
                    {"total_memory", p.totalMemory > 0 ? json(p.totalMemory) : json(nullptr)},
                    {"compute_units", p.computeUnits},
                    {"max_threads_per_block", p.maxThreadsPerBlock},
                    {"shared_memory_per_block", p.sharedMemoryPerBlock},
                    {"fp64", p.fp64},
                    {"fp16", p.fp16}});
    } catch (const Error& e) {
      entry["error"] = e.what();
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json gpus() {
  json out = json::array();
  const runtime::nvml::Nvml& nvml = runtime::nvml::nvml();
  if (!nvml.available()) return out;
  for (int i = 0; i < nvml.deviceCount(); ++i) {
    try {
      const runtime::nvml::GpuStatus s = nvml.status(i);
      json processes = json::array();
      for (const runtime::nvml::GpuProcess& p : s.processes)
        processes.push_back({{"pid", p.pid}, {"name", text(p.name)}, {"used_memory", known(p.usedMemory)}});
      out.push_back({{"index", s.index},
                     {"name", s.name},
                     {"uuid", text(s.uuid)},
                     {"memory_used", known(s.memoryUsed)},
                     {"memory_total", known(s.memoryTotal)},
                     {"gpu_utilization", known(int64_t{s.gpuUtilization})},
                     {"memory_utilization", known(int64_t{s.memoryUtilization})},
                     {"temperature", known(int64_t{s.temperature})},
                     {"power_draw", known(s.powerDraw)},
                     {"power_limit", known(s.powerLimit)},
                     {"processes", std::move(processes)}});
    } catch (const Error& e) {
      out.push_back({{"index", i}, {"error", e.what()}});
    }
  }
  return out;
}

/// The variables that change what kiln finds or how it runs.
json environment() {
  json out = json::object();
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    if (name.rfind("KILN_", 0) == 0 || name.rfind("CUDA_", 0) == 0 || name.rfind("POCL_", 0) == 0 ||
        name == "LD_LIBRARY_PATH" || name == "OCL_ICD_VENDORS" || name == "OPENBLAS_NUM_THREADS")
      out[name] = eq == std::string::npos ? "" : entry.substr(eq + 1);
  }
  return out;
}

}  // namespace

json collect() {
  return {{"kiln", kilnBuild()},           {"system", system()},   {"cpu", cpuSide()}, {"backends", backends()},
          {"device_kinds", deviceKinds()}, {"devices", devices()}, {"gpus", gpus()},   {"environment", environment()}};
}

}  // namespace kiln::env
