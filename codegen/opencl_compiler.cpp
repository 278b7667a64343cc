// OpenCL calls behind codegen/opencl_compiler.h. Built in every
// configuration: with KILN_HAVE_OPENCL it drives the ICD loader, without it
// every entry point reports that kiln was built without it, so callers
// (the tests, later the OpenCL driver) need no #if of their own.
#include "codegen/opencl_compiler.h"

#include <fmt/format.h>

#include "runtime/error.h"

#if KILN_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <chrono>
#include <mutex>
#endif

namespace kiln::codegen {

#if KILN_HAVE_OPENCL

namespace {

/// The first device of the first platform that has one, and a context on
/// it, found once; `error` says why there is none.
struct FirstDevice {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  std::string description;
  std::string error;
};

std::string deviceString(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "?";
  std::string text(size, '\0');
  if (clGetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return "?";
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
  return text;
}

FirstDevice findDevice() {
  FirstDevice found;
  cl_uint platforms = 0;
  cl_int status = clGetPlatformIDs(0, nullptr, &platforms);
  if (status != CL_SUCCESS || platforms == 0) {
    // -1001 is the ICD loader's "no platform" (CL_PLATFORM_NOT_FOUND_KHR).
    found.error = fmt::format(
        "no OpenCL platform found (clGetPlatformIDs: {}); install an OpenCL driver such as "
        "Debian's pocl-opencl-icd",
        status);
    return found;
  }
  std::vector<cl_platform_id> ids(platforms);
  clGetPlatformIDs(platforms, ids.data(), nullptr);
  for (cl_platform_id platform : ids) {
    cl_device_id device = nullptr;
    cl_uint count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &count) != CL_SUCCESS || count == 0) continue;
    found.context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
    if (status != CL_SUCCESS) {
      found.error =
          fmt::format("clCreateContext failed on OpenCL device {}: {}", deviceString(device, CL_DEVICE_NAME), status);
      return found;
    }
    found.device = device;
    found.description =
        fmt::format("{} | {} | {} | {}", deviceString(device, CL_DEVICE_NAME), deviceString(device, CL_DEVICE_VENDOR),
                    deviceString(device, CL_DRIVER_VERSION), deviceString(device, CL_DEVICE_OPENCL_C_VERSION));
    return found;
  }
  found.error = fmt::format("none of the {} OpenCL platform(s) has a device", platforms);
  return found;
}

const FirstDevice& firstDevice() {
  static const FirstDevice device = findDevice();
  return device;
}

std::string buildLog(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS || size <= 1)
    return {};
  std::string log(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

/// Releases the program on every path out of compileOpenCL.
struct ProgramGuard {
  cl_program program = nullptr;
  ~ProgramGuard() {
    if (program) clReleaseProgram(program);
  }
};

}  // namespace

bool openclAvailable(std::string* why) {
  const FirstDevice& d = firstDevice();
  if (why) *why = d.error;
  return d.device != nullptr;
}

std::string openclDeviceDescription() {
  const FirstDevice& d = firstDevice();
  return d.device ? d.description : "OpenCL unavailable";
}

OpenCLBinary compileOpenCL(const std::string& source, const std::string& programName) {
  const FirstDevice& d = firstDevice();
  KILN_CHECK(d.device, "opencl: cannot build program {}: {}", programName, d.error);
  const auto start = std::chrono::steady_clock::now();
  ProgramGuard guard;
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int status = CL_SUCCESS;
  guard.program = clCreateProgramWithSource(d.context, 1, &text, &length, &status);
  KILN_CHECK(status == CL_SUCCESS, "opencl: clCreateProgramWithSource failed for program {}: {}", programName, status);
  status = clBuildProgram(guard.program, 1, &d.device, kOpenCLBuildOptions, nullptr, nullptr);
  OpenCLBinary binary;
  binary.log = buildLog(guard.program, d.device);
  KILN_CHECK(status == CL_SUCCESS, "opencl: building program {} for {} failed ({}):\n{}", programName, d.description,
             status, binary.log.empty() ? "(no log)" : binary.log);
  size_t size = 0;
  status = clGetProgramInfo(guard.program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
  KILN_CHECK(status == CL_SUCCESS && size > 0, "opencl: program {} for {}: no binary ({})", programName, d.description,
             status);
  binary.binary.resize(size);
  unsigned char* data = binary.binary.data();
  status = clGetProgramInfo(guard.program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr);
  KILN_CHECK(status == CL_SUCCESS, "opencl: clGetProgramInfo(CL_PROGRAM_BINARIES) failed for program {}: {}",
             programName, status);
  binary.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

#else  // !KILN_HAVE_OPENCL

bool openclAvailable(std::string* why) {
  if (why) *why = "kiln was built without the OpenCL ICD loader (Debian ocl-icd-opencl-dev)";
  return false;
}

std::string openclDeviceDescription() { return "OpenCL unavailable"; }

OpenCLBinary compileOpenCL(const std::string& source, const std::string& programName) {
  fail("opencl: cannot build program {}: kiln was built without the OpenCL ICD loader (Debian ocl-icd-opencl-dev)",
       programName);
}

#endif

}  // namespace kiln::codegen
