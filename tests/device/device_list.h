// The device-generic test suite (PyTorch's instantiate_device_type_tests):
// one test body, instantiated for every device this process can use — the
// CPU always, opencl:0 when an OpenCL platform has a device (PoCL in CI),
// cuda:0 when a driver and a GPU are found. KILN_TEST_DEVICES (a comma
// list of kinds, e.g. "cpu,opencl") narrows it. At start the suite prints
// the devices it runs on and why any kind was left out.
//
// Every test runs on a stream of its own, not the device's default stream
// (DeviceTest::SetUp), so that a missing wait between streams shows.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::testing {

/// The devices the suite runs on, found once.
const std::vector<Device>& testDevices();

/// "cpu", "opencl0": a gtest name for a device.
std::string deviceTestName(const ::testing::TestParamInfo<Device>& info);

/// A test on one device, run on a fresh non-default stream of it.
class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override;
  void TearDown() override;
  Device device() const { return GetParam(); }
  /// The stream the test runs on.
  const Stream& stream() const { return stream_; }

 private:
  Stream stream_;
  std::unique_ptr<StreamGuard> guard_;
};

/// Bit-for-bit equality of two tensors' values (read from their devices);
/// NaNs equal NaNs.
::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b);
/// |a - b| <= atol + rtol * |b| elementwise, in f64.
::testing::AssertionResult allClose(const Tensor& a, const Tensor& b, double rtol, double atol);

/// Deterministic values of `shape` in about [-1.6, 1.6] (a pattern, no RNG).
Tensor values(const Shape& shape, float scale = 1.0f);

}  // namespace kiln::testing

/// Instantiates the DeviceTest-derived suite `Suite` for every test device.
#define KILN_INSTANTIATE_DEVICE_TESTS(Suite)                                                   \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::kiln::testing::testDevices()), \
                           ::kiln::testing::deviceTestName)
