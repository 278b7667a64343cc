// OpenCL devices as kiln sees them (the driver is runtime/opencl_device.cpp):
// every device of every platform the ICD loader lists, numbered opencl:0,
// opencl:1, ... in that order, each with one context; programs are built
// here for a device, so that codegen (codegen/opencl_target.cpp) and the
// tools never include <CL/cl.h>.
//
// Built in every configuration: without the ICD loader (KILN_HAVE_OPENCL
// off) there are no devices and available() says kiln was built without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime::opencl {

/// What kiln reads of one OpenCL device.
struct DeviceInfo {
  std::string platform;         ///< CL_PLATFORM_NAME ("Portable Computing Language")
  std::string platformVersion;  ///< CL_PLATFORM_VERSION
  std::string name;             ///< CL_DEVICE_NAME
  std::string vendor;
  std::string driverVersion;   ///< CL_DRIVER_VERSION
  std::string deviceVersion;   ///< CL_DEVICE_VERSION ("OpenCL 3.0 PoCL ...")
  std::string openclCVersion;  ///< CL_DEVICE_OPENCL_C_VERSION
  std::string type;            ///< "cpu", "gpu", "accelerator"
  int64_t globalMemory = 0;    ///< CL_DEVICE_GLOBAL_MEM_SIZE
  int64_t maxAllocation = 0;   ///< CL_DEVICE_MAX_MEM_ALLOC_SIZE
  int64_t localMemory = 0;     ///< CL_DEVICE_LOCAL_MEM_SIZE
  int computeUnits = 0;
  int64_t maxWorkGroupSize = 0;
  bool fp64 = false;           ///< cl_khr_fp64
  bool fp16 = false;           ///< cl_khr_fp16 (kiln stores f16 without it)
  bool commandBuffer = false;  ///< cl_khr_command_buffer
  /// What compiled code depends on: "<name> | <vendor> | <driver> | <OpenCL C version>".
  std::string description() const;
};

/// Whether any OpenCL device is usable; `why` says why not and what to install.
bool available(std::string* why = nullptr);
/// The devices, found once per process (empty when unavailable).
const std::vector<DeviceInfo>& devices();

/// The options every program is built with (Note [Eager equals compiled]):
/// OpenCL C 1.2, IEEE division and square root. FP contraction is turned off
/// by a pragma in every kernel (codegen/opencl_dialect.cpp).
inline constexpr const char* kBuildOptions = "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt";

struct ProgramBinary {
  std::vector<uint8_t> bytes;  ///< CL_PROGRAM_BINARIES, for loading on the same device
  std::string log;             ///< the build log (warnings); empty when clean
  double buildMs = 0;
};

/// Builds OpenCL C `source` for device `index` with kBuildOptions. kiln::Error
/// naming the program and the device, with the build log, when it fails.
ProgramBinary buildProgram(int index, const std::string& source, const std::string& programName);

}  // namespace kiln::runtime::opencl
