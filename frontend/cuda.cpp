// kiln::cuda (frontend/cuda.h): forwards to the device registry and NVML.
#include "frontend/cuda.h"

#include "runtime/device.h"

namespace kiln::cuda {

bool isAvailable(std::string* why) { return kiln::isAvailable(DeviceType::cuda, why); }

int deviceCount() { return kiln::deviceCount(DeviceType::cuda); }

DeviceProperties getDeviceProperties(int index) { return runtime::deviceInterface(Device::cuda(index)).properties(); }

bool nvmlAvailable(std::string* why) {
  const runtime::nvml::Nvml& nvml = runtime::nvml::nvml();
  if (why) *why = nvml.reason();
  return nvml.available();
}

std::vector<GpuStatus> gpuStatus() { return runtime::nvml::nvml().status(); }

std::vector<GpuProcess> listGpuProcesses(int index) { return runtime::nvml::nvml().processes(index); }

}  // namespace kiln::cuda
