// What cuDNN's convolution call (runtime/cuda_dnn.h) does on the host before
// it needs cuDNN, run on the simulated device (simulated_device.h), whose
// memory is not host memory: a convolution whose sums are over nothing fills
// its result with zeros through the driver, and an empty one writes
// nothing. The cuDNN kernels need a GPU (tests/gpu/cuda_conv_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/conv.h"
#include "runtime/cuda_dnn.h"
#include "runtime/device_interface.h"
#include "unit/device/simulated_device.h"

namespace kiln {
namespace {

TEST(CudaDnnHost, AConvolutionOverNoImagesFillsItsWeightGradientWithZeros) {
  const Device dev = testing::simulatedDevice();
  runtime::DeviceInterface& d = runtime::deviceInterface(dev);
  runtime::ConvCall c;
  c.kind = runtime::ConvCall::Kind::weightGrad;
  c.dtype = DType::f64;
  c.n = 0, c.c = 2, c.h = 4, c.w = 4, c.o = 3, c.kh = 3, c.kw = 3, c.ho = 2, c.wo = 2;
  c.xStrides = runtime::contiguousStrides(0, 2, 4, 4);
  c.yStrides = runtime::contiguousStrides(0, 3, 2, 2);
  const size_t count = 3 * 2 * 3 * 3;
  const runtime::DevicePtr x = d.allocate(8, {}), y = d.allocate(8, {}), w = d.allocate(count * sizeof(double), {});
  const unsigned char poison = 0x7f;
  d.fill(w, count * sizeof(double), &poison, 1, {});
  const runtime::DevicePtr buffers[] = {x, y, w};
  const std::vector<int64_t> args = c.encode();
  runtime::cuda::conv({dev, {}, buffers, args});
  std::vector<double> out(count, 1.0);
  d.copyDeviceToHost(out.data(), w, count * sizeof(double), {});
  EXPECT_EQ(out, std::vector<double>(count, 0.0));

  // No output channels: no result, nothing written.
  d.fill(w, count * sizeof(double), &poison, 1, {});
  c.o = 0;
  const std::vector<int64_t> none = c.encode();
  runtime::cuda::conv({dev, {}, buffers, none});
  d.copyDeviceToHost(out.data(), w, count * sizeof(double), {});
  for (double v : out) EXPECT_EQ(std::memcmp(&v, "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", 8), 0);
  for (runtime::DevicePtr p : {x, y, w}) d.free(p);
}

}  // namespace
}  // namespace kiln
