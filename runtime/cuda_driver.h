// The CUDA driver (libcuda.so.1), opened at run time (runtime::DynamicLibrary)
// and asked whether it can run kernels here: the first thing a CUDA device
// driver of kiln's needs, and what kiln-env reports. No CUDA header is
// included and nothing is linked, so kiln starts on machines without a
// driver (DEVICE_NOTES, "CUDA through dlopen").
//
// Only entry points that have one ABI (cuInit, cuDriverGetVersion,
// cuDeviceGetCount) are resolved by name here; the ones CUDA's headers map
// to versioned symbols (cuMemAlloc -> cuMemAlloc_v2, ...) must be asked of
// cuGetProcAddress with a pinned version, because dlsym of the plain name
// gives the oldest ABI.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {

/// What the driver said when probed.
struct DriverProbe {
  bool usable = false;    ///< loaded, initialized, and at least one GPU
  std::string library;    ///< the file that loaded; empty when none did
  int initResult = -1;    ///< cuInit's CUresult: 0 success, 34 stub library, 100 no device, 35 driver too old
  int driverVersion = 0;  ///< cuDriverGetVersion: 13000 is CUDA 13.0; 0 when unknown
  int deviceCount = 0;
  std::string reason;  ///< why it is not usable and what to do; empty when usable
};

/// Where the driver is looked for: $KILN_CUDA_DRIVER_LIBRARY alone when set,
/// else libcuda.so.1 (never the toolkit's stubs/libcuda.so: it loads, but
/// cuInit fails with CUDA_ERROR_STUB_LIBRARY).
std::vector<std::string> driverCandidates();

/// Opens the first of `candidates` that loads and probes it. A fresh probe
/// each call, for tests; driver() probes once.
DriverProbe probeDriver(std::span<const std::string> candidates);

/// The probe of driverCandidates(), made on first use.
const DriverProbe& driver();

/// The GPU architecture a cubin (an ELF image for NVIDIA GPUs, as NVRTC
/// writes it) was compiled for, as 10 * major + minor (90 for sm_90); 0 when
/// `image` is not a cubin. Read from the ELF header's e_flags: bits 8-15 in
/// the CUDA 12.8+ layout (EI_ABIVERSION 8 and later), bits 0-7 before.
int cubinArch(std::span<const unsigned char> image);

}  // namespace kiln::runtime::cuda
