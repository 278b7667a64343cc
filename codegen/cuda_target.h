// The CUDA target (codegen/target.h): kernels in the CUDA C dialect
// (codegen/cuda_dialect.cpp), compiled by NVRTC (codegen/nvrtc_compiler.h)
// into a cubin for the device's own architecture, kept in kiln's disk cache,
// loaded on the CUDA driver (runtime/cuda_device.cpp); matmul through cuBLAS
// and the gathers as kiln's own NVRTC-built kernels
// (codegen/cuda_library.h).
//
// A cubin, not PTX: the driver loads a cubin for the device's exact sm_XY
// without JIT compiling it, and refuses one for another architecture with
// CUDA_ERROR_NO_BINARY_FOR_GPU (209); PTX newer than the driver's JIT would
// be refused with CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222) where the NVRTC of
// the toolkit is newer than the driver (DEVICE_NOTES, "CUDA through dlopen").
#pragma once

#include <string>
#include <string_view>

#include "codegen/c_renderer.h"
#include "codegen/target.h"

namespace kiln::codegen {

/// The CUDA target.
const Target& cudaTarget();

/// 90 for "sm_90" (a DeviceProperties::arch of a CUDA device); kiln::Error
/// for anything else.
int smArchOf(std::string_view arch);

/// NVRTC's options and version as the disk cache keys on them.
std::string cudaCompilerDescription();

/// `kernel` compiled by NVRTC into a cubin for sm_<smArch>, as the CUDA
/// driver loads it (format cubin, the kernel's entry point). Needs no GPU.
runtime::KernelImage buildCudaImage(const RenderedKernel& kernel, int smArch);

}  // namespace kiln::codegen
