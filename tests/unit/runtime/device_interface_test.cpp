// The device interface's CPU driver (runtime/cpu_device.cpp) and the stream
// and event API over it (runtime/stream.h): memory and its statistics,
// copies and fills at offsets, loading and launching a kernel, streams,
// events and their timing, and the errors for a device that cannot be used.
// The contract for devices whose work is deferred is tested on a simulated
// device (tests/unit/device/).
#include "runtime/device_interface.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "common/error_of.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/stream.h"

namespace kiln::runtime {
namespace {

DeviceInterface& cpu() { return deviceInterface(Device::cpu()); }

TEST(CpuDevice, PropertiesSayItsMemoryIsHostMemory) {
  const DeviceProperties& p = cpu().properties();
  EXPECT_TRUE(p.hostAccessible);
  EXPECT_GE(p.computeUnits, 1);
  EXPECT_EQ(cpu().device(), Device::cpu());
}

TEST(CpuDevice, AllocationsShowInItsStatistics) {
  const AllocatorStats before = cpu().memoryStats();
  DevicePtr h = cpu().allocate(3000, StreamHandle{});
  EXPECT_EQ(cpu().memoryStats().allocatedBytes - before.allocatedBytes, 3072) << "rounded to 512 B";
  cpu().free(h);
  EXPECT_EQ(cpu().memoryStats().allocatedBytes, before.allocatedBytes);
}

TEST(CpuDevice, CopiesAtOffsetsInEveryDirection) {
  auto a = allocateBuffer(Device::cpu(), 64), b = allocateBuffer(Device::cpu(), 64);
  const StreamHandle s = currentStream(Device::cpu()).handle();
  std::vector<int32_t> host = {1, 2, 3, 4, 5, 6, 7, 8};
  cpu().copyHostToDevice(a->ptr(8), host.data(), 32, s);   // a[2..10) = 1..8
  cpu().copyDeviceToDevice(b->ptr(0), a->ptr(16), 16, s);  // b[0..4) = a[4..8) = 3..6
  std::vector<int32_t> back(4, 0);
  cpu().copyDeviceToHost(back.data(), b->ptr(4), 12, s);  // b[1..4)
  EXPECT_EQ(back, (std::vector<int32_t>{4, 5, 6, 0}));
  EXPECT_EQ(static_cast<int32_t*>(a->hostData())[2], 1);
}

TEST(CpuDevice, FillsRepeatPatternsOfEveryWidth) {
  auto buf = allocateBuffer(Device::cpu(), 1 << 20);
  const StreamHandle s = currentStream(Device::cpu()).handle();
  const uint64_t wide = 0x0123456789abcdefull;
  cpu().fill(buf->ptr(8), (1 << 20) - 8, &wide, 8, s);
  const auto* p = static_cast<const uint64_t*>(buf->hostData());
  for (int64_t i = 1; i < (1 << 17); ++i) ASSERT_EQ(p[i], wide) << i;
  const uint16_t half = 0x3c00;
  cpu().fill(buf->ptr(2), 6, &half, 2, s);
  const auto* q = static_cast<const uint16_t*>(buf->hostData());
  EXPECT_EQ(std::vector<uint16_t>(q + 1, q + 5), (std::vector<uint16_t>{0x3c00, 0x3c00, 0x3c00, 0xcdef}))
      << "three halves from element 1; element 4 is the low half of the wide pattern";
  const unsigned char byte = 0x5a;
  cpu().fill(buf->ptr(1), 1, &byte, 1, s);
  EXPECT_EQ(static_cast<const unsigned char*>(buf->hostData())[1], 0x5a);
  EXPECT_THROW(cpu().fill(buf->ptr(), 6, &wide, 4, s), InternalError) << "6 bytes are not whole 4-byte patterns";
}

// out[i] = in[i] + args[0]
void addArg(void* const* buffers, const int64_t* args, int64_t begin, int64_t end) {
  const auto* in = static_cast<const int64_t*>(buffers[0]);
  auto* out = static_cast<int64_t*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i) out[i] = in[i] + args[0];
}

TEST(CpuDevice, LaunchesALoadedKernelOverItsShapeAtItsBuffersOffsets) {
  const int64_t n = 100000;
  auto in = allocateBuffer(Device::cpu(), (n + 1) * 8), out = allocateBuffer(Device::cpu(), n * 8);
  auto* x = static_cast<int64_t*>(in->hostData());
  for (int64_t i = 0; i <= n; ++i) x[i] = i * 3;
  auto kernel = cpu().loadModule(KernelImage::hostFunction("add_arg", &addArg));
  EXPECT_EQ(kernel->name(), "add_arg");
  const std::vector<DevicePtr> buffers = {in->ptr(8), out->ptr()};
  const std::vector<int64_t> args = {5};
  LaunchShape shape;
  shape.numel = n;
  shape.grain = 4096;
  cpu().launch(*kernel, buffers, args, shape, currentStream(Device::cpu()).handle());
  const auto* y = static_cast<const int64_t*>(out->hostData());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], (i + 1) * 3 + 5) << i;
}

TEST(CpuDevice, RefusesKernelsInAnotherFormat) {
  KernelImage image;
  image.format = KernelImage::Format::cubin;
  image.name = "k";
  EXPECT_THROW(cpu().loadModule(image), InternalError);
}

TEST(Streams, CurrentStreamIsPerThreadAndRestoredByTheGuard) {
  const Device dev = Device::cpu();
  EXPECT_TRUE(currentStream(dev).isDefault());
  const Stream side = Stream::create(dev);
  EXPECT_FALSE(side.isDefault());
  {
    StreamGuard guard(side);
    EXPECT_EQ(currentStream(dev), side);
    bool otherThreadDefault = false;
    std::thread([&] { otherThreadDefault = currentStream(dev).isDefault(); }).join();
    EXPECT_TRUE(otherThreadDefault) << "the current stream is thread-local";
  }
  EXPECT_TRUE(currentStream(dev).isDefault());
  EXPECT_TRUE(side.query());
  side.synchronize();
}

TEST(Events, TimeTheWorkBetweenThem) {
  const Stream s = currentStream(Device::cpu());
  Event never;
  EXPECT_TRUE(never.query()) << "an event never recorded is complete";
  EXPECT_FALSE(never.recorded());
  Event start(true), end(true);
  start.record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  end.record(s);
  end.synchronize();
  EXPECT_GE(start.elapsedMs(end), 19.0);
  Event untimed;
  untimed.record(s);
  EXPECT_EQ(errorOf([&] { start.elapsedMs(untimed); }), "event: elapsedMs needs two events made with enableTiming");
  EXPECT_EQ(errorOf([&] { start.elapsedMs(never); }), "event: elapsedMs needs two events made with enableTiming");
  s.wait(start);  // a no-op on the cpu, but allowed
}

TEST(Devices, AnUnusableDeviceSaysWhy) {
  std::string why;
  if (isDeviceAvailable(Device::cuda(0), &why)) GTEST_SKIP() << "this machine has a usable CUDA GPU";
  // The CUDA driver's reason (runtime/cuda_device.cpp): the probe's, on a
  // machine without a driver "no CUDA driver: libcuda.so.1: ...".
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(errorOf([] { deviceInterface(Device::cuda(1)); }), "cuda:1: the device cannot be used: " + why);
  EXPECT_EQ(errorOf([] { allocateBuffer(Device::cuda(0), 8); }), "cuda:0: the device cannot be used: " + why);
  EXPECT_TRUE(isDeviceAvailable(Device::cpu()));
  EXPECT_FALSE(isDeviceAvailable(Device(DeviceType::cpu, 1), &why));
  EXPECT_EQ(why, "no such device (this process sees 1 cpu device)");
}

}  // namespace
}  // namespace kiln::runtime
