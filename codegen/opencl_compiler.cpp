// codegen/opencl_compiler.h over the OpenCL devices of the runtime
// (runtime/opencl_runtime.h): the first device, opencl:0.
#include "codegen/opencl_compiler.h"

#include "runtime/opencl_runtime.h"

namespace kiln::codegen {

static_assert(std::string_view(kOpenCLBuildOptions) == runtime::opencl::kBuildOptions);

bool openclAvailable(std::string* why) { return runtime::opencl::available(why); }

std::string openclDeviceDescription() {
  return runtime::opencl::available() ? runtime::opencl::devices()[0].description() : "OpenCL unavailable";
}

OpenCLBinary compileOpenCL(const std::string& source, const std::string& programName) {
  runtime::opencl::ProgramBinary built = runtime::opencl::buildProgram(0, source, programName);
  OpenCLBinary binary;
  binary.binary.assign(built.bytes.begin(), built.bytes.end());
  binary.log = std::move(built.log);
  binary.compileMs = built.buildMs;
  return binary;
}

}  // namespace kiln::codegen
