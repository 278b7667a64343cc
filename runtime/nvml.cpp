// NVML behind runtime/nvml.h. The few types and constants used are declared
// here from NVML's documented ABI (nvml.h is not part of the CUDA 13
// toolkit's headers, and including it would make it a build dependency).
#include "runtime/nvml.h"

#include <fmt/format.h>

#include <fstream>

#include "runtime/dynamic_library.h"
#include "runtime/error.h"

namespace kiln::runtime::nvml {
namespace {

// nvmlReturn_t values the code names.
constexpr int kSuccess = 0;
constexpr int kInsufficientSize = 7;
// Buffer sizes nvml.h names: NVML_DEVICE_NAME_V2_BUFFER_SIZE,
// NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
constexpr unsigned kNameSize = 96, kUuidSize = 96, kDriverVersionSize = 80;
constexpr unsigned kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

using Device = void*;  // nvmlDevice_t
struct Memory {        // nvmlMemory_t
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};
struct ProcessInfo {  // nvmlProcessInfo_t (v2 layout), as the _v3 queries fill it
  unsigned pid;
  unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE (all ones) when unknown
  unsigned gpuInstanceId, computeInstanceId;
};

}  // namespace

/// NVML's entry points, resolved once per Nvml::open.
struct Nvml::Api {
  int (*init)() = nullptr;  // nvmlInit_v2
  const char* (*errorString)(int) = nullptr;
  int (*driverVersion)(char*, unsigned) = nullptr;
  int (*count)(unsigned*) = nullptr;           // nvmlDeviceGetCount_v2
  int (*handle)(unsigned, Device*) = nullptr;  // nvmlDeviceGetHandleByIndex_v2
  int (*name)(Device, char*, unsigned) = nullptr;
  int (*uuid)(Device, char*, unsigned) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*temperature)(Device, unsigned, unsigned*) = nullptr;
  int (*power)(Device, unsigned*) = nullptr;                    // milliwatts
  int (*powerLimit)(Device, unsigned*) = nullptr;               // nvmlDeviceGetEnforcedPowerLimit, milliwatts
  int (*processes)(Device, unsigned*, ProcessInfo*) = nullptr;  // nvmlDeviceGetComputeRunningProcesses_v3

  std::string error(int result) const {
    const char* text = errorString ? errorString(result) : nullptr;
    return text ? fmt::format("{} ({})", text, result) : fmt::format("nvmlReturn_t {}", result);
  }
};

namespace {

template <class F>
void resolve(const DynamicLibrary& library, const char* name, F& slot, std::string& error) {
  std::string why;
  slot = reinterpret_cast<F>(library.symbol(name, &why));
  if (!slot && error.empty()) error = why;
}

/// Text NVML writes into a buffer of `size`, or empty when the query fails.
template <class Query>
std::string text(Query query, unsigned size) {
  std::string out(size, '\0');
  if (query(out.data(), size) != kSuccess) return {};
  out.resize(out.find('\0') == std::string::npos ? size : out.find('\0'));
  return out;
}

}  // namespace

Nvml Nvml::open(std::span<const std::string> candidates) {
  Nvml nvml;
  const DynamicLibrary library = DynamicLibrary::open(candidates);
  if (!library.loaded()) {
    nvml.reason_ = fmt::format("no NVML: {}; NVML comes with the NVIDIA driver (libnvidia-ml.so.1)", library.error());
    return nvml;
  }
  nvml.library_ = library.name();
  auto api = std::make_shared<Api>();
  std::string error;
  resolve(library, "nvmlInit_v2", api->init, error);
  resolve(library, "nvmlErrorString", api->errorString, error);
  resolve(library, "nvmlSystemGetDriverVersion", api->driverVersion, error);
  resolve(library, "nvmlDeviceGetCount_v2", api->count, error);
  resolve(library, "nvmlDeviceGetHandleByIndex_v2", api->handle, error);
  resolve(library, "nvmlDeviceGetName", api->name, error);
  resolve(library, "nvmlDeviceGetUUID", api->uuid, error);
  resolve(library, "nvmlDeviceGetMemoryInfo", api->memory, error);
  resolve(library, "nvmlDeviceGetUtilizationRates", api->utilization, error);
  resolve(library, "nvmlDeviceGetTemperature", api->temperature, error);
  resolve(library, "nvmlDeviceGetPowerUsage", api->power, error);
  resolve(library, "nvmlDeviceGetEnforcedPowerLimit", api->powerLimit, error);
  resolve(library, "nvmlDeviceGetComputeRunningProcesses_v3", api->processes, error);
  if (!error.empty()) {
    nvml.reason_ = fmt::format("{} is not a usable NVML (a driver older than 470?): {}", library.name(), error);
    return nvml;
  }
  if (const int r = api->init(); r != kSuccess) {
    nvml.reason_ = fmt::format("nvmlInit_v2 failed: {}; is the NVIDIA driver loaded?", api->error(r));
    return nvml;
  }
  nvml.driverVersion_ = text([&](char* s, unsigned n) { return api->driverVersion(s, n); }, kDriverVersionSize);
  unsigned count = 0;
  if (const int r = api->count(&count); r != kSuccess) {
    nvml.reason_ = fmt::format("nvmlDeviceGetCount_v2 failed: {}", api->error(r));
    return nvml;
  }
  nvml.deviceCount_ = static_cast<int>(count);
  nvml.api_ = std::move(api);
  return nvml;
}

void* Nvml::device(int index) const {
  KILN_CHECK(available(), "nvml: unavailable: {}", reason_);
  KILN_CHECK(index >= 0 && index < deviceCount_, "nvml: no GPU {} (NVML sees {})", index, deviceCount_);
  Device device = nullptr;
  const int r = api_->handle(static_cast<unsigned>(index), &device);
  KILN_CHECK(r == kSuccess, "nvml: GPU {}: nvmlDeviceGetHandleByIndex_v2 failed: {}", index, api_->error(r));
  return device;
}

std::vector<GpuProcess> Nvml::processes(int index) const {
  Device gpu = device(index);
  // The list can grow between the sizing call and the filling one: ask
  // again with the size NVML then reports.
  std::vector<ProcessInfo> infos(8);
  unsigned count = static_cast<unsigned>(infos.size());
  int r = api_->processes(gpu, &count, infos.data());
  for (int tries = 0; r == kInsufficientSize && tries < 4; ++tries) {
    infos.resize(count + 8);
    count = static_cast<unsigned>(infos.size());
    r = api_->processes(gpu, &count, infos.data());
  }
  KILN_CHECK(r == kSuccess, "nvml: GPU {}: nvmlDeviceGetComputeRunningProcesses_v3 failed: {}", index, api_->error(r));
  std::vector<GpuProcess> out;
  for (unsigned i = 0; i < count && i < infos.size(); ++i) {
    GpuProcess p;
    p.pid = infos[i].pid;
    const unsigned long long used = infos[i].usedGpuMemory;
    p.usedMemory = used >= (1ull << 63) ? -1 : static_cast<int64_t>(used);
    p.name = processName(p.pid);
    out.push_back(std::move(p));
  }
  return out;
}

GpuStatus Nvml::status(int index) const {
  Device gpu = device(index);
  const Api& api = *api_;
  GpuStatus s;
  s.index = index;
  s.name = text([&](char* t, unsigned n) { return api.name(gpu, t, n); }, kNameSize);
  s.uuid = text([&](char* t, unsigned n) { return api.uuid(gpu, t, n); }, kUuidSize);
  if (Memory m{}; api.memory(gpu, &m) == kSuccess) {
    s.memoryUsed = static_cast<int64_t>(m.used);
    s.memoryTotal = static_cast<int64_t>(m.total);
  }
  if (Utilization u{}; api.utilization(gpu, &u) == kSuccess) {
    s.gpuUtilization = static_cast<int>(u.gpu);
    s.memoryUtilization = static_cast<int>(u.memory);
  }
  if (unsigned t = 0; api.temperature(gpu, kTemperatureGpu, &t) == kSuccess) s.temperature = static_cast<int>(t);
  if (unsigned mw = 0; api.power(gpu, &mw) == kSuccess) s.powerDraw = mw / 1000.0;
  if (unsigned mw = 0; api.powerLimit(gpu, &mw) == kSuccess) s.powerLimit = mw / 1000.0;
  s.processes = processes(index);
  return s;
}

std::vector<GpuStatus> Nvml::status() const {
  KILN_CHECK(available(), "nvml: unavailable: {}", reason_);
  std::vector<GpuStatus> all;
  for (int i = 0; i < deviceCount_; ++i) all.push_back(status(i));
  return all;
}

std::vector<std::string> nvmlCandidates() {
  return LibrarySearch{"KILN_NVML_LIBRARY", {"libnvidia-ml.so.1"}, {}}.candidates();
}

const Nvml& nvml() {
  static const Nvml instance = Nvml::open(nvmlCandidates());
  return instance;
}

std::string processName(int64_t pid) {
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  std::getline(comm, name);
  return name;
}

}  // namespace kiln::runtime::nvml
