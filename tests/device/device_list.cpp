// The devices of the device-generic suite and its shared helpers (device_list.h).
#include "device/device_list.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "runtime/device_interface.h"

namespace kiln::testing {

namespace {

std::vector<std::string> wantedKinds() {
  const char* env = std::getenv("KILN_TEST_DEVICES");
  std::vector<std::string> kinds;
  if (!env || !*env) return {"cpu", "opencl", "cuda"};
  std::stringstream in(env);
  for (std::string kind; std::getline(in, kind, ',');)
    if (!kind.empty()) kinds.push_back(kind);
  return kinds;
}

std::vector<Device> findDevices() {
  const std::vector<std::string> wanted = wantedKinds();
  auto isWanted = [&](DeviceType t) {
    for (const std::string& k : wanted)
      if (k == deviceTypeName(t)) return true;
    return false;
  };
  std::vector<Device> found;
  std::cout << "[ devices ] the device suite runs on:";
  for (DeviceType t : {DeviceType::cpu, DeviceType::opencl, DeviceType::cuda}) {
    if (!isWanted(t)) continue;
    std::string why;
    if (!isAvailable(t, &why)) continue;
    const Device d(t, 0);
    found.push_back(d);
    std::cout << " " << d.str() << " (" << runtime::deviceInterface(d).properties().name << ")";
  }
  std::cout << "\n";
  for (DeviceType t : {DeviceType::cpu, DeviceType::opencl, DeviceType::cuda}) {
    std::string why;
    if (!isWanted(t))
      std::cout << "[ devices ] left out " << deviceTypeName(t) << ": not in KILN_TEST_DEVICES\n";
    else if (!isAvailable(t, &why))
      std::cout << "[ devices ] left out " << deviceTypeName(t) << ": " << why << "\n";
  }
  return found;
}

}  // namespace

const std::vector<Device>& testDevices() {
  static const std::vector<Device> devices = findDevices();
  return devices;
}

std::string deviceTestName(const ::testing::TestParamInfo<Device>& info) {
  const Device d = info.param;
  return d.isCpu() ? "cpu" : std::string(deviceTypeName(d.type())) + std::to_string(d.index());
}

void DeviceTest::SetUp() {
  stream_ = Stream::create(device());
  guard_ = std::make_unique<StreamGuard>(stream_);
}

void DeviceTest::TearDown() {
  synchronize(device());
  guard_.reset();
}

::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).cpu().toVector<double>();
  const std::vector<double> y = b.to(DType::f64).cpu().toVector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0 && !(std::isnan(x[i]) && std::isnan(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i] << " (" << a.str()
                                           << ")";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult allClose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).cpu().toVector<double>();
  const std::vector<double> y = b.to(DType::f64).cpu().toVector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i] << " (" << a.str()
                                           << ")";
  }
  return ::testing::AssertionSuccess();
}

Tensor values(const Shape& shape, float scale) {
  std::vector<float> v(static_cast<size_t>(ir::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((static_cast<int64_t>(i) * 37) % 23 - 11) / 7;
  return fromVector(v, shape, Device::cpu());
}

}  // namespace kiln::testing
