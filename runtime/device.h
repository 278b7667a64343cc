// Device: where a tensor lives and a kernel runs ("cpu", "opencl:0", "cuda:0").
//
// The CPU is always available. OpenCL and CUDA devices are numbered per
// kind in the order their drivers find them (OpenCL: every device of every
// platform the ICD loader lists; CUDA: the driver's ordinals). Whether one
// can be used is asked of its driver (runtime/device_interface.h), which
// says why not: no OpenCL platform, no libcuda.so.1, the toolkit's stub
// driver, no GPU (docs/devices.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda, opencl };

/// "cpu", "cuda", "opencl".
std::string_view deviceTypeName(DeviceType type);
/// Parses a device kind's name; kiln::Error otherwise.
DeviceType parseDeviceType(std::string_view name);

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  static constexpr Device opencl(int index = 0) { return {DeviceType::opencl, index}; }
  /// The best usable device: cuda:0 when usable, else opencl:0 when
  /// usable, else the CPU.
  static Device best();
  /// Parses "cpu", "cuda", "cuda:N", "opencl", "opencl:N"; throws
  /// kiln::Error otherwise.
  static Device parse(std::string_view text);

  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool isCpu() const { return type_ == DeviceType::cpu; }
  bool isCuda() const { return type_ == DeviceType::cuda; }
  bool isOpenCL() const { return type_ == DeviceType::opencl; }
  /// "cpu", "cuda:N" or "opencl:N".
  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) = default;

 private:
  DeviceType type_ = DeviceType::cpu;
  int index_ = 0;
};

/// Whether CUDA devices can run kernels in this process; when not, `why`
/// (if non-null) receives the reason.
bool cudaAvailable(std::string* why = nullptr);

/// Whether devices of `type` can be used in this process (at least one is
/// present and its driver works); when not, `why` says why and what to
/// install.
bool isAvailable(DeviceType type, std::string* why = nullptr);
/// How many devices of `type` this process sees (0 when unavailable).
int deviceCount(DeviceType type);
/// Every usable device: the CPU, then each OpenCL and CUDA device.
std::vector<Device> devices();

/// The device factories (zeros, fromVector, randn, ...) make tensors on when
/// none is given, and so nn modules' parameters: the calling thread's, the
/// CPU until set (torch.set_default_device).
Device defaultDevice();
/// Sets the calling thread's default device; kiln::Error saying why when
/// the device cannot be used.
void setDefaultDevice(Device device);

/// Sets the calling thread's default device for a scope and restores the
/// previous one at its end (`with torch.device(...)`).
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  Device previous_;
};

}  // namespace kiln
