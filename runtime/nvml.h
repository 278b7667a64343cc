// NVML, the NVIDIA Management Library (libnvidia-ml.so.1, installed with the
// driver), opened at run time (runtime::DynamicLibrary): what nvidia-smi
// shows of each GPU — name, memory used and total, utilization, temperature,
// power draw and limit, and the processes computing on it — for kiln-env
// and kiln::cuda::gpuStatus() (frontend/cuda.h). No NVML header is included
// and nothing is linked, so kiln starts where there is no driver and says
// why NVML is unavailable instead (DEVICE_NOTES, "CUDA through dlopen").
//
// NVML numbers GPUs by PCI bus order, the CUDA driver by speed unless
// CUDA_DEVICE_ORDER=PCI_BUS_ID: an NVML index is not always the CUDA one,
// so each status carries the GPU's UUID, which both agree on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::runtime::nvml {

/// A process with a compute context on a GPU.
struct GpuProcess {
  int64_t pid = 0;
  int64_t usedMemory = -1;  ///< bytes; -1 when NVML does not say (some drivers and containers)
  /// From /proc/<pid>/comm; empty when the process is not visible here
  /// (another PID namespace: a container sees the host's PIDs).
  std::string name;
};

/// One GPU as NVML sees it. A field NVML cannot report on this GPU (not
/// supported, no permission) is -1 (numbers) or empty (text).
struct GpuStatus {
  int index = 0;                              ///< NVML's index (PCI bus order)
  std::string name;                           ///< "NVIDIA H200"
  std::string uuid;                           ///< "GPU-...", the same as the CUDA driver's
  int64_t memoryUsed = -1, memoryTotal = -1;  ///< bytes
  int gpuUtilization = -1;                    ///< percent of the last sample period a kernel ran
  int memoryUtilization = -1;                 ///< percent of it memory was read or written
  int temperature = -1;                       ///< °C, the GPU die
  double powerDraw = -1, powerLimit = -1;     ///< watts (the limit the driver enforces)
  std::vector<GpuProcess> processes;
};

/// NVML loaded, initialized and asked how many GPUs there are; or why it
/// cannot be used. One instance opens NVML once and keeps it for the
/// process (nvmlShutdown is never called: statuses may be asked any time).
class Nvml {
 public:
  /// Opens the first of `candidates` that loads and initializes it. A
  /// fresh attempt each call, for tests; nvml() opens once.
  static Nvml open(std::span<const std::string> candidates);

  bool available() const { return reason_.empty(); }
  /// Why NVML cannot be used and what to do; empty when it can.
  const std::string& reason() const { return reason_; }
  /// The file that loaded; empty when none did.
  const std::string& library() const { return library_; }
  /// The driver's version ("580.95.05"); empty when unknown.
  const std::string& driverVersion() const { return driverVersion_; }
  int deviceCount() const { return deviceCount_; }

  /// Every GPU's status, processes included. Throws kiln::Error saying why
  /// when NVML is unavailable.
  std::vector<GpuStatus> status() const;
  /// One GPU's; kiln::Error when NVML is unavailable or there is no such GPU.
  GpuStatus status(int index) const;
  /// The processes computing on GPU `index`; errors as status(index).
  std::vector<GpuProcess> processes(int index) const;

 private:
  struct Api;
  void* device(int index) const;
  std::shared_ptr<const Api> api_;
  std::string reason_, library_, driverVersion_;
  int deviceCount_ = 0;
};

/// Where NVML is looked for: $KILN_NVML_LIBRARY alone when set, else
/// libnvidia-ml.so.1 (the driver's; the toolkit's stubs/ copy is not a
/// driver and is never tried).
std::vector<std::string> nvmlCandidates();

/// NVML from nvmlCandidates(), opened on first use.
const Nvml& nvml();

/// The name of process `pid` from /proc/<pid>/comm; empty when it cannot
/// be read.
std::string processName(int64_t pid);

}  // namespace kiln::runtime::nvml
