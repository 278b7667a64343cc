// Streams, events and copies on every test device: the current stream and
// its guard, cross-stream order through events, timing, pinned memory and
// non-blocking copies, and reads that wait for their stream.
#include <gtest/gtest.h>

#include "device/device_list.h"
#include "runtime/pinned_memory.h"

namespace kiln::testing {
namespace {

class DeviceStreams : public DeviceTest {};

TEST_P(DeviceStreams, EachTestRunsOnItsOwnStreamAndGuardsRestore) {
  const Device dev = device();
  EXPECT_EQ(currentStream(dev), stream());
  EXPECT_FALSE(currentStream(dev).isDefault());
  const Stream other = Stream::create(dev);
  {
    StreamGuard guard(other);
    EXPECT_EQ(currentStream(dev), other);
  }
  EXPECT_EQ(currentStream(dev), stream());
}

TEST_P(DeviceStreams, WorkOnAnotherStreamIsOrderedByAnEvent) {
  const Device dev = device();
  const Tensor x = values({1000}).to(dev);
  const Stream side = Stream::create(dev);
  side.wait([&] {
    Event e;
    e.record(stream());
    return e;
  }());  // x's copy is on the test's stream: the side stream waits for it
  Tensor y;
  {
    StreamGuard guard(side);
    y = kiln::exp(x) * 2.0;
  }
  Event done;
  done.record(side);
  stream().wait(done);
  EXPECT_TRUE(sameBits(y, kiln::exp(values({1000})) * 2.0));
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_TRUE(side.query());
}

TEST_P(DeviceStreams, TimingEventsMeasureTheWorkBetweenThem) {
  const Device dev = device();
  Event start(true), end(true);
  const Tensor x = values({256, 256}).to(dev);
  start.record(stream());
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = kiln::tanh(y) + 0.5;
  end.record(stream());
  end.synchronize();
  EXPECT_TRUE(start.query());
  EXPECT_GT(start.elapsedMs(end), 0.0);
  Event untimed;
  untimed.record(stream());
  untimed.synchronize();
  EXPECT_THROW((void)start.elapsedMs(untimed), Error);
}

TEST_P(DeviceStreams, PinnedCopiesInBothDirectionsAreRight) {
  const Device dev = device();
  const Tensor host = values({64, 33});
  const Tensor pinned = host.pinMemory();
  EXPECT_TRUE(pinned.isPinned());
  EXPECT_FALSE(host.isPinned());
  EXPECT_TRUE(runtime::PinnedAllocator::instance().isPinned(pinned.impl()->storage->hostData()));
  const Tensor there = pinned.to(dev, true);
  EXPECT_EQ(there.device(), dev);
  const Tensor back = (there * 3.0).to(Device::cpu(), true);
  if (!dev.isCpu()) {
    EXPECT_TRUE(back.isPinned()) << "a non-blocking copy to the host lands in pinned memory";
  }
  stream().synchronize();
  EXPECT_TRUE(sameBits(back, host * 3.0));
  // From pageable memory a copy is synchronous and right too.
  EXPECT_TRUE(sameBits(host.to(dev, true).cpu(), host));
}

TEST_P(DeviceStreams, ReadsWaitForTheirStream) {
  const Device dev = device();
  Tensor y = values({4096}).to(dev);
  for (int i = 0; i < 10; ++i) y = y * 1.5 - 0.25;
  Tensor ref = values({4096});
  for (int i = 0; i < 10; ++i) ref = ref * 1.5 - 0.25;
  // No synchronize: item(), toVector() and cpu() wait themselves.
  EXPECT_EQ(y.narrow(0, 17, 1).item<float>(), ref.narrow(0, 17, 1).item<float>());
  EXPECT_TRUE(sameBits(y.cpu(), ref));
}

KILN_INSTANTIATE_DEVICE_TESTS(DeviceStreams);

}  // namespace
}  // namespace kiln::testing
