// Races forced on an OpenCL queue (DEVICE_NOTES: test ordering through
// events, never concurrency): a user event holds one queue, so the work
// enqueued there waits while the host goes on, and each test shows the
// result is right with kiln's wait and wrong without it — the race is
// really there, and kiln's event is what prevents it.
// Skips, with the reason, without an OpenCL device.
#include <gtest/gtest.h>

#include "device/device_list.h"
#include "runtime/opencl_context.h"
#include "runtime/pinned_memory.h"

namespace kiln::testing {
namespace {

/// Holds a stream's queue until release() (or the end of its scope).
class QueueGate {
 public:
  explicit QueueGate(const Stream& stream) {
    cl_int status = CL_SUCCESS;
    gate_ = clCreateUserEvent(runtime::opencl::context(stream.device().index()), &status);
    KILN_CL(status);
    KILN_CL(clEnqueueBarrierWithWaitList(runtime::opencl::queueOf(stream.device().index(), stream.handle()), 1,
                                         &gate_, nullptr));
  }
  void release() {
    if (gate_) clSetUserEventStatus(gate_, CL_COMPLETE), clReleaseEvent(gate_), gate_ = nullptr;
  }
  ~QueueGate() { release(); }

 private:
  cl_event gate_ = nullptr;
};

class OpenCLRace : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!isAvailable(DeviceType::opencl, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  }
};

TEST_F(OpenCLRace, QueriesSayNotYetWhileAStreamIsHeldAndDoneAfter) {
  const Device dev = Device::opencl(0);
  const Stream s = Stream::create(dev);
  StreamGuard guard(s);
  const Tensor x = values({257}).to(dev);
  s.synchronize();
  EXPECT_TRUE(s.query());
  QueueGate gate(s);
  const Tensor y = x * 2.0;
  Event done;
  done.record(s);
  EXPECT_FALSE(s.query()) << "the multiply waits behind the gate";
  EXPECT_FALSE(done.query());
  gate.release();
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_TRUE(s.query());
  EXPECT_TRUE(sameBits(y, values({257}) * 2.0));
}

/// Copies pinned values of a size no other test uses to opencl:0 without
/// blocking, while the queue is held; then releases the pinned tensor and
/// pins other values of the same size. Returns what reached the device.
std::vector<float> copyThenRepin(bool waitForUses) {
  const Device dev = Device::opencl(0);
  const Stream s = Stream::create(dev);
  StreamGuard guard(s);
  runtime::PinnedAllocator::instance().emptyCache();
  runtime::PinnedAllocator::instance().setWaitForUses(waitForUses);
  QueueGate gate(s);
  Tensor pinned = values({3001}).pinMemory();
  const Tensor there = pinned.to(dev, true);
  pinned = Tensor();  // the block goes back to the pinned allocator
  const Tensor other = full({3001}, 99.0).pinMemory();  // reuses it only if its copy is done
  gate.release();
  s.synchronize();
  runtime::PinnedAllocator::instance().setWaitForUses(true);
  return there.cpu().toVector();
}

TEST_F(OpenCLRace, APinnedBlockIsNotReusedBeforeItsCopyHasRun) {
  EXPECT_EQ(copyThenRepin(true), values({3001}).toVector()) << "kiln waits for the copy's event";
  EXPECT_EQ(copyThenRepin(false), std::vector<float>(3001, 99.0f))
      << "without the wait the pending copy reads the new values: the race is real";
}

/// Reads a tensor made on the test's stream on a held second stream, frees
/// it (declaring the second stream's use when `record`), then fills a new
/// tensor of the same size on the first stream. Returns what the second
/// stream computed.
std::vector<float> useOnAnotherStream(bool record) {
  const Device dev = Device::opencl(0);
  const Stream a = Stream::create(dev), b = Stream::create(dev);
  StreamGuard onA(a);
  Tensor t = values({2999}).to(dev);
  a.synchronize();
  QueueGate gate(b);
  Tensor y;
  {
    StreamGuard onB(b);
    y = t * 2.0;  // waits behind the gate
  }
  if (record) t.recordStream(b);
  t = Tensor();  // freed on a: reusable there at once unless recorded
  // On a, not held: a tensor of t's size takes t's block when it is free.
  const Tensor u = fromVector(std::vector<float>(2999, 7.0f), dev);
  a.synchronize();
  gate.release();
  b.synchronize();
  return y.cpu().toVector();
}

TEST_F(OpenCLRace, RecordStreamKeepsMemoryFromReuseUntilTheOtherStreamHasRun) {
  EXPECT_EQ(useOnAnotherStream(true), (values({2999}) * 2.0).toVector()) << "recordStream keeps t's block aside";
  EXPECT_EQ(useOnAnotherStream(false), std::vector<float>(2999, 14.0f))
      << "without recordStream the block is refilled before the second stream reads it: the race is real";
}

}  // namespace
}  // namespace kiln::testing
