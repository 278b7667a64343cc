// kiln::cuda: what a program asks about NVIDIA GPUs, shaped like torch.cuda —
// whether CUDA can be used and why not, how many devices, each device's
// properties (from its driver), and what nvidia-smi shows of each GPU
// (through NVML, loaded at run time: runtime/nvml.h).
//
//   std::string why;
//   if (!kiln::cuda::isAvailable(&why)) std::cerr << "no CUDA: " << why << "\n";
//   for (const kiln::cuda::GpuStatus& g : kiln::cuda::gpuStatus())
//     std::cout << g.name << ": " << g.memoryUsed << " of " << g.memoryTotal << " bytes\n";
#pragma once

#include <string>
#include <vector>

#include "runtime/device_interface.h"
#include "runtime/nvml.h"

namespace kiln::cuda {

using GpuStatus = runtime::nvml::GpuStatus;
using GpuProcess = runtime::nvml::GpuProcess;
using DeviceProperties = runtime::DeviceProperties;

/// Whether CUDA devices can run kernels in this process; when not, `why`
/// (if non-null) says why and what to install (torch.cuda.is_available).
bool isAvailable(std::string* why = nullptr);

/// How many CUDA devices this process sees; 0 when CUDA is unavailable.
int deviceCount();

/// What the driver of cuda:`index` says of it. Throws kiln::Error with the
/// reason when there is no such usable device.
DeviceProperties getDeviceProperties(int index = 0);

/// Whether NVML (libnvidia-ml.so.1, from the NVIDIA driver) can be used;
/// when not, `why` says why.
bool nvmlAvailable(std::string* why = nullptr);

/// Every GPU as NVML sees it (nvidia-smi's table). NVML numbers GPUs in PCI
/// bus order, which is CUDA's only under CUDA_DEVICE_ORDER=PCI_BUS_ID; match
/// them by GpuStatus::uuid. Throws kiln::Error saying why when NVML is
/// unavailable.
std::vector<GpuStatus> gpuStatus();

/// The processes computing on NVML's GPU `index`, with the memory each uses
/// (torch.cuda.list_gpu_processes). Throws kiln::Error when NVML is
/// unavailable or there is no such GPU.
std::vector<GpuProcess> listGpuProcesses(int index = 0);

}  // namespace kiln::cuda
