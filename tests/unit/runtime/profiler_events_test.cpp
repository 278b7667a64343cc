// The profiler's collection core (runtime/profiler_events.h): nothing is
// recorded while flags() is 0, ranges nest and drain sorted, each thread
// has its own id and buffer, launches pair with their kernels, and
// allocator events carry bytes and totals.
#include "runtime/profiler_events.h"

#include <gtest/gtest.h>

#include <thread>

#include "runtime/buffer.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;
namespace profiler = kiln::profiler;

/// Holds collection for a test and gives it back.
struct Collecting {
  explicit Collecting(uint32_t flags) {
    EXPECT_TRUE(profiler::acquire());
    (void)profiler::drain();
    profiler::setFlags(flags);
  }
  ~Collecting() { profiler::release(); }
};

void doubleIt(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  auto* x = static_cast<float*>(buffers[0]);
  auto* y = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i) y[i] = 2 * x[i];
}

TEST(ProfilerEvents, RecordsNothingWhileOff) {
  ASSERT_EQ(profiler::flags(), 0u);
  {
    profiler::RecordFunction r("test", "off");
    EXPECT_EQ(r.event(), nullptr);
  }
  profiler::recordMemory("cpu", 64, 64, 64);
  EXPECT_TRUE(profiler::drain().empty());
}

TEST(ProfilerEvents, RangesNestAndDrainSortedByStart) {
  Collecting on(profiler::kCpu);
  {
    profiler::RecordFunction outer("test", "outer");
    ASSERT_NE(outer.event(), nullptr);
    { profiler::RecordFunction a("test", "a"); }
    { profiler::RecordFunction b("test", "b"); }
  }
  const std::vector<profiler::TraceEvent> events = profiler::drain();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].name, "outer") << "the enclosing range first, though it ended last";
  EXPECT_EQ(events[1].name, "a");
  EXPECT_EQ(events[2].name, "b");
  for (const profiler::TraceEvent& e : events) EXPECT_EQ(e.thread, profiler::threadId());
  EXPECT_LE(events[0].startNs, events[1].startNs);
  EXPECT_LE(events[1].endNs, events[2].startNs);
  EXPECT_GE(events[0].endNs, events[2].endNs);
  EXPECT_TRUE(profiler::drain().empty()) << "a drain empties the buffers";
}

TEST(ProfilerEvents, EachThreadHasItsOwnId) {
  Collecting on(profiler::kCpu);
  uint32_t other = 0;
  std::thread t([&] {
    profiler::RecordFunction r("test", "other thread");
    other = profiler::threadId();
  });
  t.join();  // its events outlive it until drained
  { profiler::RecordFunction r("test", "this thread"); }
  const std::vector<profiler::TraceEvent> events = profiler::drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_NE(other, profiler::threadId());
  for (const profiler::TraceEvent& e : events)
    EXPECT_EQ(e.thread, e.name == "other thread" ? other : profiler::threadId()) << e.name;
}

TEST(ProfilerEvents, AStepsLaunchAndKernelShareACorrelationAndCountBytes) {
  runtime::Executable exe;
  exe.device = Device::cpu();
  exe.slots = {{64 * sizeof(float), Device::cpu()}, {64 * sizeof(float), Device::cpu()}};
  exe.inputSlots = {0};
  exe.outputSlots = {1};
  runtime::KernelStep step;
  step.name = "double_it";
  step.kernel = runtime::loadHostKernel("double_it", &doubleIt);
  step.slots = {0, 1};
  step.shape.numel = 64;
  exe.steps.emplace_back(step);
  auto input = runtime::allocateBuffer(Device::cpu(), 64 * sizeof(float));
  Collecting on(profiler::kCpu | profiler::kDevice | profiler::kMemory);
  (void)exe.run({input});
  const std::vector<profiler::TraceEvent> events = profiler::drain();
  const profiler::TraceEvent *launch = nullptr, *kernel = nullptr;
  int allocations = 0;
  for (const profiler::TraceEvent& e : events) {
    if (e.kind == profiler::EventKind::range && e.name == "launch_kernel") launch = &e;
    if (e.kind == profiler::EventKind::kernel) kernel = &e;
    if (e.kind == profiler::EventKind::memory && e.bytes > 0) {
      ++allocations;
      EXPECT_GE(e.bytes, static_cast<int64_t>(64 * sizeof(float)));
      EXPECT_GE(e.totalAllocated, e.bytes);
      EXPECT_GE(e.totalReserved, e.totalAllocated);
    }
  }
  ASSERT_NE(launch, nullptr);
  ASSERT_NE(kernel, nullptr);
  EXPECT_NE(launch->correlation, 0u);
  EXPECT_EQ(launch->correlation, kernel->correlation);
  EXPECT_EQ(kernel->name, "double_it");
  EXPECT_EQ(kernel->device, "cpu");
  EXPECT_EQ(kernel->bytes, static_cast<int64_t>(2 * 64 * sizeof(float))) << "Note [Bytes moved]: input and output";
  EXPECT_LE(kernel->startNs, kernel->endNs);
  EXPECT_EQ(allocations, 1) << "the output's buffer";
}

}  // namespace
