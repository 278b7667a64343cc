// What the CUDA library calls (codegen/cuda_library.h) do on the host before
// they launch anything, run on the simulated device (simulated_device.h),
// whose memory is not host memory: the index is read back through the
// driver and checked with the CPU's error text, before anything is written,
// and a matmul with nothing to sum fills zeros through the driver. The
// kernels themselves need a GPU (tests/gpu/cuda_device_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "codegen/cuda_library.h"
#include "common/error_of.h"
#include "runtime/blas.h"
#include "runtime/device_interface.h"
#include "runtime/indexing.h"
#include "unit/device/simulated_device.h"

namespace kiln {
namespace {

/// Device memory holding `values` (or `bytes` of 0x7f when empty).
template <typename T>
runtime::DevicePtr upload(Device dev, const std::vector<T>& values, size_t bytes = 0) {
  runtime::DeviceInterface& d = runtime::deviceInterface(dev);
  const size_t size = values.empty() ? bytes : values.size() * sizeof(T);
  const runtime::DevicePtr p = d.allocate(size, {});
  if (values.empty()) {
    const unsigned char poison = 0x7f;
    d.fill(p, size, &poison, 1, {});
  } else {
    d.copyHostToDevice(p, values.data(), size, {});
  }
  return p;
}

template <typename T>
std::vector<T> download(Device dev, runtime::DevicePtr p, size_t n) {
  std::vector<T> out(n);
  runtime::deviceInterface(dev).copyDeviceToHost(out.data(), p, n * sizeof(T), {});
  return out;
}

TEST(CudaLibraryHost, AnIndexOutOfRangeIsTheCpusErrorAndNothingIsWritten) {
  const Device dev = testing::simulatedDevice();
  runtime::IndexCall c;
  c.dtype = DType::f32;
  c.indexDType = DType::i64;
  c.dim = 0;
  c.sizes = {5, 2};
  c.strides = {2, 1};
  c.numIndices = 3;
  c.indexStride = 2;  // every other element of the index buffer: 1, 7, 0
  const std::vector<int64_t> args = c.encode();
  const runtime::DevicePtr x = upload(dev, std::vector<float>(10, 1.0f));
  const runtime::DevicePtr index = upload(dev, std::vector<int64_t>{1, 99, 7, 99, 0});
  const runtime::DevicePtr out = upload<float>(dev, {}, 6 * sizeof(float));
  const runtime::DevicePtr select[] = {x, index, out};
  EXPECT_EQ(errorOf([&] {
              codegen::cudaIndexSelect({dev, {}, select, args});
            }),
            "index_select: index 7 is out of range for dimension 0 of size 5");

  c.sourceStrides = {2, 1};
  const std::vector<int64_t> addArgs = c.encode();
  const runtime::DevicePtr source = upload(dev, std::vector<float>(6, 2.0f));
  const runtime::DevicePtr sum = upload<float>(dev, {}, 10 * sizeof(float));
  const runtime::DevicePtr add[] = {x, index, source, sum};
  EXPECT_EQ(errorOf([&] {
              codegen::cudaIndexAdd({dev, {}, add, addArgs});
            }),
            "index_add: index 7 is out of range for dimension 0 of size 5");
  // Nothing was written: out and sum hold their poison.
  for (float v : download<float>(dev, sum, 10)) EXPECT_EQ(std::memcmp(&v, "\x7f\x7f\x7f\x7f", 4), 0);
  for (float v : download<float>(dev, out, 6)) EXPECT_EQ(std::memcmp(&v, "\x7f\x7f\x7f\x7f", 4), 0);

  // An i32 index, negative.
  c.indexDType = DType::i32;
  c.indexStride = 1;
  c.numIndices = 2;
  const std::vector<int64_t> args32 = c.encode();
  const runtime::DevicePtr index32 = upload(dev, std::vector<int32_t>{0, -1});
  const runtime::DevicePtr select32[] = {x, index32, out};
  EXPECT_EQ(errorOf([&] {
              codegen::cudaIndexSelect({dev, {}, select32, args32});
            }),
            "index_select: index -1 is out of range for dimension 0 of size 5");
  for (runtime::DevicePtr p : {x, index, out, source, sum, index32}) runtime::deviceInterface(dev).free(p);
}

TEST(CudaLibraryHost, AMatmulWithNothingToSumFillsZeros) {
  const Device dev = testing::simulatedDevice();
  runtime::MatmulCall c;
  c.dtype = DType::f64;
  c.m = 3, c.n = 4, c.k = 0;
  c.aRowStride = 0, c.aColStride = 1, c.bRowStride = 4, c.bColStride = 1;
  c.batch = {2};
  c.aBatchStrides = {0};
  c.bBatchStrides = {0};
  const std::vector<int64_t> args = c.encode();
  const runtime::DevicePtr a = upload<double>(dev, {}, 8), b = upload<double>(dev, {}, 8);
  const runtime::DevicePtr out = upload<double>(dev, {}, 24 * sizeof(double));
  const runtime::DevicePtr buffers[] = {a, b, out};
  codegen::cudaMatmul({dev, {}, buffers, args});
  EXPECT_EQ(download<double>(dev, out, 24), std::vector<double>(24, 0.0));
  c.m = 0;  // no result: nothing runs
  const std::vector<int64_t> empty = c.encode();
  codegen::cudaMatmul({dev, {}, buffers, empty});
  for (runtime::DevicePtr p : {a, b, out}) runtime::deviceInterface(dev).free(p);
}

}  // namespace
}  // namespace kiln
