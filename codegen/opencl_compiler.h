// The OpenCL C compiler of the first OpenCL device found: builds the
// OpenCL C that codegen/c_renderer.h writes (openclDialect()) into the
// device's program binary (DESIGN.md §6), as codegen/nvrtc_compiler.h does
// for CUDA C. In CI the device is PoCL's CPU device (Debian
// pocl-opencl-icd), which compiles OpenCL C 1.2.
//
// This header never includes <CL/cl.h>: the OpenCL calls are the runtime's
// (runtime/opencl_runtime.h), built with or without the ICD loader
// (KILN_HAVE_OPENCL); without it the functions below say so instead of
// failing to link.
//
// The build options are fixed, because results equal eager ones only with
// them (Note [Eager equals compiled]): OpenCL C 1.2, and IEEE division and
// square root (-cl-fp32-correctly-rounded-divide-sqrt; GPUs otherwise allow
// 2.5-3 ulp). FP contraction is turned off by a pragma in every kernel.
#pragma once

#include <string>
#include <vector>

namespace kiln::codegen {

/// The options compileOpenCL passes to clBuildProgram.
inline constexpr const char* kOpenCLBuildOptions = "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt";

struct OpenCLBinary {
  std::vector<unsigned char> binary;  ///< CL_PROGRAM_BINARIES: for clCreateProgramWithBinary on the same device
  std::string log;                    ///< the build log (warnings); empty when clean
  double compileMs = 0;               ///< wall time of the OpenCL calls
};

/// Whether this build has the OpenCL ICD loader (KILN_HAVE_OPENCL) and it
/// finds a device; `why` says why not.
bool openclAvailable(std::string* why = nullptr);

/// The device compileOpenCL builds for, as a kernel cache would key on it:
/// "<device name> | <vendor> | <driver version> | <OpenCL C version>";
/// "OpenCL unavailable" without one.
std::string openclDeviceDescription();

/// Builds OpenCL C (one or several kernels) with kOpenCLBuildOptions for
/// the first device of the first platform that has one, and returns that
/// device's binary. Throws kiln::Error naming the program and the device
/// with the build log on failure, or saying why there is no OpenCL device
/// or that kiln was built without the ICD loader.
OpenCLBinary compileOpenCL(const std::string& source, const std::string& programName);

}  // namespace kiln::codegen
