// The profiler on a device whose work is deferred until the host waits
// (simulated_device.h, registered as cuda): kernels are timed by the
// device's events, which the profile waits for when it stops, and each
// launch is paired with its kernel on the stream.
#include <gtest/gtest.h>

#include <map>

#include "frontend/kiln.h"
#include "frontend/profiler.h"
#include "runtime/executable.h"
#include "unit/device/simulated_device.h"

namespace kiln {
namespace {

using testing::simulatedCounters;
using testing::simulatedDevice;

TEST(SimulatedDeviceProfile, KernelsAreTimedByDeviceEventsWaitedForAtStop) {
  const Device device = simulatedDevice();
  Tensor x = fromVector({1, 2, 3, 4, 5, 6}, {2, 3}).to(device);
  (void)(kiln::exp(x) * 2.0).to(Device::cpu());  // compiled outside the profile
  profiler::Profile p;
  p.start();
  const int64_t launchesBefore = runtime::kernelLaunchCount();
  const int64_t ranBefore = simulatedCounters().launches;
  Tensor y = kiln::exp(x) * 2.0;
  Tensor z = relu(y - 3.0);
  const int64_t launched = runtime::kernelLaunchCount() - launchesBefore;
  p.stop();  // waits for the kernels' events: the device runs them
  const int64_t ran = simulatedCounters().launches - ranBefore;

  std::map<uint64_t, const profiler::TraceEvent*> launches;
  std::vector<const profiler::TraceEvent*> kernels;
  for (const profiler::TraceEvent& e : p.events()) {
    if (e.kind == profiler::EventKind::range && e.category == "launch") launches[e.correlation] = &e;
    if (e.kind == profiler::EventKind::kernel) kernels.push_back(&e);
  }
  ASSERT_EQ(static_cast<int64_t>(kernels.size()), launched);
  int64_t kernelSteps = 0;
  for (const profiler::TraceEvent* k : kernels) kernelSteps += k->category == "kernel" ? 1 : 0;
  EXPECT_EQ(kernelSteps, ran) << "every kernel profiled has run once stop() returns";
  int64_t previousEnd = 0;
  for (const profiler::TraceEvent* k : kernels) {
    EXPECT_EQ(k->device, device.str());
    if (k->category != "copy") {
      EXPECT_EQ(k->detail, "device timed") << k->name;
    }
    ASSERT_TRUE(launches.count(k->correlation)) << k->name << " has no launch";
    EXPECT_GE(k->startNs, launches[k->correlation]->startNs) << k->name << " starts before its launch";
    EXPECT_GE(k->startNs, previousEnd) << k->name << " overlaps the kernel before it on its stream";
    EXPECT_GE(k->endNs, k->startNs);
    previousEnd = k->endNs;
  }
  EXPECT_EQ(z.to(Device::cpu()).toVector(), (relu(kiln::exp(fromVector({1, 2, 3, 4, 5, 6}, {2, 3})) * 2.0 - 3.0)).toVector());
}

}  // namespace
}  // namespace kiln
