// OpenCL discovery and program builds (runtime/opencl_runtime.h): every
// device of every platform, one context each, found once per process.
#include "runtime/opencl_runtime.h"

#include <fmt/format.h>

#include "runtime/error.h"

#if KILN_HAVE_OPENCL
#include <chrono>
#include <mutex>

#include "runtime/opencl_context.h"
#endif

namespace kiln::runtime::opencl {

std::string DeviceInfo::description() const {
  return fmt::format("{} | {} | {} | {}", name, vendor, driverVersion, openclCVersion);
}

#if KILN_HAVE_OPENCL

std::string errorName(cl_int status) {
  switch (status) {
#define KILN_CL_NAME(code) \
  case code: return #code;
    KILN_CL_NAME(CL_DEVICE_NOT_FOUND)
    KILN_CL_NAME(CL_DEVICE_NOT_AVAILABLE)
    KILN_CL_NAME(CL_COMPILER_NOT_AVAILABLE)
    KILN_CL_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    KILN_CL_NAME(CL_OUT_OF_RESOURCES)
    KILN_CL_NAME(CL_OUT_OF_HOST_MEMORY)
    KILN_CL_NAME(CL_BUILD_PROGRAM_FAILURE)
    KILN_CL_NAME(CL_INVALID_VALUE)
    KILN_CL_NAME(CL_INVALID_DEVICE)
    KILN_CL_NAME(CL_INVALID_CONTEXT)
    KILN_CL_NAME(CL_INVALID_COMMAND_QUEUE)
    KILN_CL_NAME(CL_INVALID_MEM_OBJECT)
    KILN_CL_NAME(CL_INVALID_BINARY)
    KILN_CL_NAME(CL_INVALID_BUILD_OPTIONS)
    KILN_CL_NAME(CL_INVALID_PROGRAM)
    KILN_CL_NAME(CL_INVALID_PROGRAM_EXECUTABLE)
    KILN_CL_NAME(CL_INVALID_KERNEL_NAME)
    KILN_CL_NAME(CL_INVALID_KERNEL)
    KILN_CL_NAME(CL_INVALID_ARG_INDEX)
    KILN_CL_NAME(CL_INVALID_ARG_VALUE)
    KILN_CL_NAME(CL_INVALID_ARG_SIZE)
    KILN_CL_NAME(CL_INVALID_KERNEL_ARGS)
    KILN_CL_NAME(CL_INVALID_WORK_DIMENSION)
    KILN_CL_NAME(CL_INVALID_WORK_GROUP_SIZE)
    KILN_CL_NAME(CL_INVALID_WORK_ITEM_SIZE)
    KILN_CL_NAME(CL_INVALID_GLOBAL_OFFSET)
    KILN_CL_NAME(CL_INVALID_EVENT_WAIT_LIST)
    KILN_CL_NAME(CL_INVALID_EVENT)
    KILN_CL_NAME(CL_INVALID_OPERATION)
    KILN_CL_NAME(CL_INVALID_BUFFER_SIZE)
    KILN_CL_NAME(CL_INVALID_GLOBAL_WORK_SIZE)
    KILN_CL_NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    KILN_CL_NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
#undef KILN_CL_NAME
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return fmt::format("OpenCL error {}", status);
  }
}

namespace {

std::string deviceString(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "?";
  std::string text(size, '\0');
  if (clGetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return "?";
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string platformString(cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  if (clGetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "?";
  std::string text(size, '\0');
  if (clGetPlatformInfo(platform, what, size, text.data(), nullptr) != CL_SUCCESS) return "?";
  while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
  return text;
}

template <typename T>
T deviceValue(cl_device_id device, cl_device_info what) {
  T value{};
  if (clGetDeviceInfo(device, what, sizeof value, &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

struct Found {
  std::vector<DeviceInfo> infos;
  std::vector<cl_device_id> ids;
  std::vector<cl_context> contexts;
  std::string error;  ///< why there is no device
};

Found discover() {
  Found found;
  cl_uint platforms = 0;
  cl_int status = clGetPlatformIDs(0, nullptr, &platforms);
  if (status != CL_SUCCESS || platforms == 0) {
    found.error = fmt::format(
        "no OpenCL platform found (clGetPlatformIDs: {}); install an OpenCL driver (an ICD): Debian's "
        "pocl-opencl-icd runs OpenCL on the CPU, intel-opencl-icd and mesa-opencl-icd on GPUs",
        errorName(status == CL_SUCCESS ? -1001 : status));
    return found;
  }
  std::vector<cl_platform_id> ids(platforms);
  clGetPlatformIDs(platforms, ids.data(), nullptr);
  std::vector<std::string> problems;
  for (cl_platform_id platform : ids) {
    cl_uint count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
    std::vector<cl_device_id> devices(count);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, devices.data(), nullptr);
    for (cl_device_id device : devices) {
      cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
      if (status != CL_SUCCESS) {
        problems.push_back(fmt::format("clCreateContext on {}: {}", deviceString(device, CL_DEVICE_NAME),
                                       errorName(status)));
        continue;
      }
      DeviceInfo info;
      info.platform = platformString(platform, CL_PLATFORM_NAME);
      info.platformVersion = platformString(platform, CL_PLATFORM_VERSION);
      info.name = deviceString(device, CL_DEVICE_NAME);
      info.vendor = deviceString(device, CL_DEVICE_VENDOR);
      info.driverVersion = deviceString(device, CL_DRIVER_VERSION);
      info.deviceVersion = deviceString(device, CL_DEVICE_VERSION);
      info.openclCVersion = deviceString(device, CL_DEVICE_OPENCL_C_VERSION);
      const auto type = deviceValue<cl_device_type>(device, CL_DEVICE_TYPE);
      info.type = (type & CL_DEVICE_TYPE_GPU) ? "gpu" : (type & CL_DEVICE_TYPE_CPU) ? "cpu" : "accelerator";
      info.globalMemory = static_cast<int64_t>(deviceValue<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE));
      info.maxAllocation = static_cast<int64_t>(deviceValue<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
      info.localMemory = static_cast<int64_t>(deviceValue<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE));
      info.computeUnits = static_cast<int>(deviceValue<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
      info.maxWorkGroupSize = static_cast<int64_t>(deviceValue<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE));
      const std::string extensions = " " + deviceString(device, CL_DEVICE_EXTENSIONS) + " ";
      info.fp64 = extensions.find(" cl_khr_fp64 ") != std::string::npos;
      info.fp16 = extensions.find(" cl_khr_fp16 ") != std::string::npos;
      info.commandBuffer = extensions.find(" cl_khr_command_buffer ") != std::string::npos;
      found.infos.push_back(std::move(info));
      found.ids.push_back(device);
      found.contexts.push_back(context);
    }
  }
  if (found.infos.empty())
    found.error = problems.empty()
                      ? fmt::format("none of the {} OpenCL platform(s) has a device", platforms)
                      : fmt::format("no OpenCL device could be opened: {}", fmt::join(problems, "; "));
  return found;
}

const Found& found() {
  static const Found* f = new Found(discover());  // leaked: contexts outlive static destruction
  return *f;
}

/// Releases the program on every path out of buildProgram.
struct ProgramGuard {
  cl_program program = nullptr;
  ~ProgramGuard() {
    if (program) clReleaseProgram(program);
  }
};

std::string buildLog(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS || size <= 1)
    return {};
  std::string log(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

}  // namespace

bool available(std::string* why) {
  const Found& f = found();
  if (why) *why = f.error;
  return !f.infos.empty();
}

const std::vector<DeviceInfo>& devices() { return found().infos; }

cl_device_id deviceId(int index) {
  const Found& f = found();
  KILN_ASSERT(index >= 0 && static_cast<size_t>(index) < f.ids.size(), "opencl:{} does not exist", index);
  return f.ids[static_cast<size_t>(index)];
}

cl_context context(int index) {
  const Found& f = found();
  KILN_ASSERT(index >= 0 && static_cast<size_t>(index) < f.contexts.size(), "opencl:{} does not exist", index);
  return f.contexts[static_cast<size_t>(index)];
}

ProgramBinary buildProgram(int index, const std::string& source, const std::string& programName) {
  std::string why;
  KILN_CHECK(available(&why), "opencl: cannot build program {}: {}", programName, why);
  KILN_CHECK(index >= 0 && static_cast<size_t>(index) < devices().size(),
             "opencl: cannot build program {} for opencl:{}: this process sees {} OpenCL device(s)", programName,
             index, devices().size());
  const std::string where = devices()[static_cast<size_t>(index)].description();
  cl_device_id device = deviceId(index);
  const auto start = std::chrono::steady_clock::now();
  ProgramGuard guard;
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int status = CL_SUCCESS;
  guard.program = clCreateProgramWithSource(context(index), 1, &text, &length, &status);
  KILN_CHECK(status == CL_SUCCESS, "opencl: clCreateProgramWithSource failed for program {}: {}", programName,
             errorName(status));
  status = clBuildProgram(guard.program, 1, &device, kBuildOptions, nullptr, nullptr);
  ProgramBinary binary;
  binary.log = buildLog(guard.program, device);
  KILN_CHECK(status == CL_SUCCESS, "opencl: building program {} for opencl:{} ({}) failed ({}):\n{}", programName,
             index, where, errorName(status), binary.log.empty() ? "(no log)" : binary.log);
  size_t size = 0;
  status = clGetProgramInfo(guard.program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
  KILN_CHECK(status == CL_SUCCESS && size > 0, "opencl: program {} for opencl:{}: no binary ({})", programName, index,
             errorName(status));
  binary.bytes.resize(size);
  unsigned char* data = binary.bytes.data();
  status = clGetProgramInfo(guard.program, CL_PROGRAM_BINARIES, sizeof data, &data, nullptr);
  KILN_CHECK(status == CL_SUCCESS, "opencl: clGetProgramInfo(CL_PROGRAM_BINARIES) failed for program {}: {}",
             programName, errorName(status));
  binary.buildMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

#else  // !KILN_HAVE_OPENCL

namespace {
constexpr const char* kNoLoader = "kiln was built without the OpenCL ICD loader (Debian ocl-icd-opencl-dev)";
}

bool available(std::string* why) {
  if (why) *why = kNoLoader;
  return false;
}

const std::vector<DeviceInfo>& devices() {
  static const std::vector<DeviceInfo> none;
  return none;
}

ProgramBinary buildProgram(int, const std::string&, const std::string& programName) {
  fail("opencl: cannot build program {}: {}", programName, kNoLoader);
}

#endif

}  // namespace kiln::runtime::opencl
