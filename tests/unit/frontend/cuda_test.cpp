// kiln::cuda (frontend/cuda.h): the torch.cuda-shaped questions agree with
// the device registry and NVML, and a machine without CUDA or NVML gets
// kiln::Error with the reason instead of properties or statuses.
#include "frontend/cuda.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error_of.h"
#include "runtime/device.h"

namespace kiln {
namespace {

TEST(Cuda, AvailabilityAndCountAgreeWithTheDeviceRegistry) {
  std::string why, registryWhy;
  const bool available = cuda::isAvailable(&why);
  EXPECT_EQ(available, isAvailable(DeviceType::cuda, &registryWhy));
  EXPECT_EQ(why, registryWhy);
  EXPECT_EQ(available, why.empty()) << why;
  EXPECT_EQ(cuda::deviceCount(), deviceCount(DeviceType::cuda));
  if (available) {
    EXPECT_GT(cuda::deviceCount(), 0);
  } else {
    EXPECT_EQ(cuda::deviceCount(), 0);
  }
}

TEST(Cuda, PropertiesOfAnUnusableDeviceSayWhy) {
  std::string why;
  if (cuda::isAvailable(&why)) {
    const cuda::DeviceProperties p = cuda::getDeviceProperties(0);
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.totalMemory, 0);
    GTEST_SKIP() << "CUDA is available here: " << p.name;
  }
  const std::string error = errorOf([] { cuda::getDeviceProperties(0); });
  EXPECT_TRUE(error.starts_with("cuda:0: ")) << error;
  EXPECT_NE(error.find(why), std::string::npos) << error << " does not give the reason " << why;
}

TEST(Cuda, GpuStatusThrowsWithNvmlsReasonWhenNvmlIsUnavailable) {
  std::string why;
  if (cuda::nvmlAvailable(&why)) {
    EXPECT_EQ(why, "");
    for (const cuda::GpuStatus& g : cuda::gpuStatus()) EXPECT_FALSE(g.name.empty());
    GTEST_SKIP() << "NVML is available here";
  }
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(errorOf([] { cuda::gpuStatus(); }), "nvml: unavailable: " + why);
  EXPECT_EQ(errorOf([] { cuda::listGpuProcesses(0); }), "nvml: unavailable: " + why);
}

}  // namespace
}  // namespace kiln
