// The first OpenCL device as a KernelDevice (gpu_kernel_cases.h), for tests
// that build and run rendered OpenCL C: PoCL's CPU device in CI.
#pragma once

#include <memory>
#include <string>

#include "unit/codegen/gpu_kernel_cases.h"

namespace kiln::codegen::testing {

/// The device, or null with the reason in `why` when kiln was built without
/// the ICD loader or no OpenCL device is found.
std::unique_ptr<KernelDevice> makeOpenCLTestDevice(std::string* why);

}  // namespace kiln::codegen::testing
