// The gloo backend on opencl tensors (PoCL in CI): pinned host copies
// ordered on the caller's stream (Note [Collectives on device streams] in
// runtime/dist_gloo.cpp). Each rank thread works on a non-default stream of
// its own, and the inputs are written by work still pending on that stream
// when the collective is called, so a copy that does not wait for the
// caller's stream reads stale data.
#include <gtest/gtest.h>

#include "runtime/device_interface.h"
#include "runtime/stream.h"
#include "tests/common/error_of.h"
#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

const Device kDevice = Device::opencl(0);

class OpenCL : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!isAvailable(DeviceType::opencl, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  }
};

/// `numel` f32 elements at byte offset 16 of an opencl:0 buffer: first
/// `stale` everywhere, then `value` by a fill still pending on `stream`.
rd::BufferRef deviceValues(int64_t numel, float stale, float value, const Stream& stream) {
  const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
  auto buffer = runtime::allocateBuffer(kDevice, bytes + 16);
  runtime::DeviceInterface& driver = runtime::deviceInterface(kDevice);
  std::vector<float> host(static_cast<size_t>(numel) + 4, stale);
  driver.copyHostToDevice(buffer->ptr(), host.data(), bytes + 16, stream.handle());
  driver.fill(buffer->ptr(16), bytes, &value, sizeof(float), stream.handle());
  return rd::BufferRef::of(buffer, 16, numel, DType::f32, {numel});
}

std::vector<float> read(const rd::BufferRef& b, const Stream& stream) {
  std::vector<float> host(static_cast<size_t>(b.numel));
  runtime::deviceInterface(kDevice).copyDeviceToHost(host.data(), b.ptr(), b.bytes(), stream.handle());
  return host;
}

TEST_F(OpenCL, CollectivesSeeThePendingWorkOfTheCallersStream) {
  constexpr int n = 2;
  constexpr int64_t numel = 33;
  auto groups = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    Stream stream = Stream::create(kDevice);
    StreamGuard guard(stream);
    rd::ProcessGroup& g = *groups[static_cast<size_t>(r)];
    const float mine = static_cast<float>(r + 1);

    rd::BufferRef sum = deviceValues(numel, -100, mine, stream);
    g.allReduce(sum, rd::ReduceOp::sum)->wait();
    for (float v : read(sum, stream)) ASSERT_EQ(v, 3.0f) << "all_reduce on rank " << r;

    rd::BufferRef root = deviceValues(numel, -100, mine * 10, stream);
    g.broadcast(root, 1)->wait();
    for (float v : read(root, stream)) ASSERT_EQ(v, 20.0f) << "broadcast on rank " << r;

    rd::BufferRef in = deviceValues(numel, -100, mine, stream);
    std::vector<rd::BufferRef> gathered{deviceValues(numel, -1, -1, stream), deviceValues(numel, -1, -1, stream)};
    g.allGather(gathered, in)->wait();
    for (int k = 0; k < n; ++k)
      for (float v : read(gathered[static_cast<size_t>(k)], stream))
        ASSERT_EQ(v, static_cast<float>(k + 1)) << "all_gather from rank " << k << " on rank " << r;

    std::vector<rd::BufferRef> parts{deviceValues(numel, -100, mine, stream),
                                     deviceValues(numel, -100, mine * 100, stream)};
    rd::BufferRef part = deviceValues(numel, -1, -1, stream);
    g.reduceScatter(part, parts, rd::ReduceOp::max)->wait();
    for (float v : read(part, stream)) ASSERT_EQ(v, r == 0 ? 2.0f : 200.0f) << "reduce_scatter on rank " << r;
  }));
}

TEST_F(OpenCL, SendAndRecvMoveDeviceData) {
  auto groups = makeGroups(2);
  expectNoErrors(runRanks(2, [&](int r) {
    Stream stream = Stream::create(kDevice);
    StreamGuard guard(stream);
    rd::BufferRef x = deviceValues(17, -100, r == 0 ? 42.0f : 0.0f, stream);
    if (r == 0) {
      groups[0]->send(x, 1, 5)->wait();
    } else {
      groups[1]->recv(x, 0, 5)->wait();
      for (float v : read(x, stream)) ASSERT_EQ(v, 42.0f);
    }
  }));
}

TEST_F(OpenCL, CpuAndOpenCLTensorsCannotMeetInOneCall) {
  auto groups = makeGroups(2);
  Stream stream = Stream::create(kDevice);
  rd::BufferRef dev = deviceValues(4, 0, 0, stream);
  rd::BufferRef cpu = cpuBuffer(DType::f32, 4);
  EXPECT_EQ(errorOf([&] {
              groups[0]->allGather({cpu, dev}, cpu);
            }),
            "all_gather: expected every tensor on one device, got f32[4]@cpu and f32[4]@opencl:0");
}

}  // namespace
}  // namespace kiln::testing::dist
