// runtime::cuda::probeDriver: what a machine without a usable CUDA driver is
// told — no library, the toolkit's stub library, a library that is not a
// driver — and that the probe of this machine is consistent.
#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace kiln::runtime::cuda {
namespace {

TEST(CudaDriver, NoLibrarySaysWhatWasTriedAndWhatToInstall) {
  const std::vector<std::string> missing = {"/nonexistent/lib/libcuda.so.1"};
  const DriverProbe probe = probeDriver(missing);
  EXPECT_FALSE(probe.usable);
  EXPECT_EQ(probe.library, "");
  EXPECT_EQ(probe.initResult, -1);
  EXPECT_EQ(probe.deviceCount, 0);
  EXPECT_EQ(probe.reason.rfind("no CUDA driver: /nonexistent/lib/libcuda.so.1: ", 0), 0u) << probe.reason;
  EXPECT_TRUE(probe.reason.ends_with("; install the NVIDIA driver")) << probe.reason;
}

TEST(CudaDriver, TheToolkitsStubLibraryIsToldApartFromADriver) {
#ifndef KILN_CUDA_STUB_DRIVER
  GTEST_SKIP() << "built without the CUDA toolkit: no stub library to try";
#else
  const std::string stub = KILN_CUDA_STUB_DRIVER;
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no stub library at " << stub;
  const DriverProbe probe = probeDriver(std::vector<std::string>{stub});
  EXPECT_FALSE(probe.usable);
  EXPECT_EQ(probe.library, stub);
  EXPECT_EQ(probe.initResult, 34);  // CUDA_ERROR_STUB_LIBRARY
  EXPECT_EQ(probe.deviceCount, 0);
  EXPECT_EQ(probe.reason.rfind(stub + " is the CUDA toolkit's stub library, not a driver", 0), 0u) << probe.reason;
#endif
}

TEST(CudaDriver, ALibraryWithoutCuInitIsNotADriver) {
  const DriverProbe probe = probeDriver(std::vector<std::string>{"libm.so.6"});
  EXPECT_FALSE(probe.usable);
  EXPECT_EQ(probe.library, "libm.so.6");
  EXPECT_EQ(probe.initResult, -1);
  EXPECT_EQ(probe.reason.rfind("libm.so.6 is not a CUDA driver: libm.so.6 has no symbol cuInit", 0), 0u)
      << probe.reason;
}

// Run alone (CTest runs each case in a process of its own): once the stub
// test has loaded stubs/libcuda.so by path, its soname answers every later
// dlopen("libcuda.so.1") in the process.
TEST(CudaDriver, ThisMachinesProbeIsConsistent) {
  const DriverProbe& probe = driver();
  std::cout << "[ info ] CUDA driver: "
            << (probe.usable ? "usable, " + std::to_string(probe.deviceCount) + " GPUs" : probe.reason) << "\n";
  EXPECT_EQ(probe.usable, probe.reason.empty()) << probe.reason;
  if (probe.usable) {
    EXPECT_EQ(probe.initResult, 0);
    EXPECT_GT(probe.deviceCount, 0);
    EXPECT_GT(probe.driverVersion, 0);
  }
  EXPECT_EQ(&driver(), &probe);  // probed once
}

// The override is the only candidate, so a wrong path is reported rather
// than another driver used in its place (runtime::LibrarySearch).
TEST(CudaDriver, TheOverrideIsTheOnlyCandidate) {
  const char* before = std::getenv("KILN_CUDA_DRIVER_LIBRARY");
  const std::string saved = before ? before : "";
  setenv("KILN_CUDA_DRIVER_LIBRARY", "/opt/driver/libcuda.so.1", 1);
  const std::vector<std::string> c = driverCandidates();
  if (before)
    setenv("KILN_CUDA_DRIVER_LIBRARY", saved.c_str(), 1);
  else
    unsetenv("KILN_CUDA_DRIVER_LIBRARY");
  EXPECT_EQ(c, (std::vector<std::string>{"/opt/driver/libcuda.so.1"}));
}

}  // namespace
}  // namespace kiln::runtime::cuda
