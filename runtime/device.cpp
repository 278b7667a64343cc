// Device parsing and printing, and CUDA availability (asked of the driver registry).
#include "runtime/device.h"

#include <charconv>

#include "runtime/device_interface.h"
#include "runtime/error.h"

namespace kiln {

std::string_view deviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
    case DeviceType::opencl: return "opencl";
  }
  return "?";
}

DeviceType parseDeviceType(std::string_view name) {
  for (DeviceType t : {DeviceType::cpu, DeviceType::cuda, DeviceType::opencl})
    if (name == deviceTypeName(t)) return t;
  fail("device: unknown device kind '{}', expected cpu, cuda or opencl", name);
}

std::string Device::str() const {
  return isCpu() ? std::string("cpu") : fmt::format("{}:{}", deviceTypeName(type_), index_);
}

Device Device::parse(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  for (DeviceType t : {DeviceType::cpu, DeviceType::cuda, DeviceType::opencl}) {
    if (kind != deviceTypeName(t)) continue;
    if (colon == std::string_view::npos) return {t, 0};
    if (t == DeviceType::cpu) break;
    const std::string_view digits = text.substr(colon + 1);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty()) return {t, index};
    break;
  }
  fail("device: cannot parse '{}', expected cpu, cuda, cuda:N, opencl or opencl:N", text);
}

bool cudaAvailable(std::string* why) { return runtime::isDeviceAvailable(Device::cuda(0), why); }

bool isAvailable(DeviceType type, std::string* why) { return runtime::isDeviceAvailable(Device(type, 0), why); }

int deviceCount(DeviceType type) { return runtime::deviceCount(type); }

std::vector<Device> devices() {
  std::vector<Device> all{Device::cpu()};
  for (DeviceType t : {DeviceType::opencl, DeviceType::cuda})
    for (int i = 0, n = deviceCount(t); i < n; ++i) all.push_back(Device(t, i));
  return all;
}

namespace {
thread_local Device tDefaultDevice = Device::cpu();
}

Device defaultDevice() { return tDefaultDevice; }

void setDefaultDevice(Device device) {
  std::string why;
  KILN_CHECK(runtime::isDeviceAvailable(device, &why), "setDefaultDevice: {} cannot be used: {}", device.str(), why);
  tDefaultDevice = device;
}

DeviceGuard::DeviceGuard(Device device) : previous_(tDefaultDevice) { setDefaultDevice(device); }

DeviceGuard::~DeviceGuard() { tDefaultDevice = previous_; }

Device Device::best() {
  if (cudaAvailable()) return cuda(0);
  if (isAvailable(DeviceType::opencl)) return opencl(0);
  return cpu();
}

}  // namespace kiln
