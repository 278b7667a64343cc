// The registry of codegen targets (codegen/target.h): the CPU's built in,
// others registered by their device kind.
#include "codegen/target.h"

#include <mutex>
#include <utility>
#include <vector>

#include "codegen/cuda_target.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {
struct Targets {
  std::mutex mutex;
  std::vector<std::pair<DeviceType, const Target*>> registered;
};

Targets& targets() {
  static auto* t = new Targets();  // leaked: kernels may be compiled during static destruction
  return *t;
}
}  // namespace

const Target& targetFor(Device device) {
  {
    Targets& t = targets();
    std::lock_guard lock(t.mutex);
    for (const auto& [type, target] : t.registered)
      if (type == device.type()) return *target;
  }
  if (device.isCpu()) return cpuTarget();
  if (device.isOpenCL()) return openclTarget();
  if (device.isCuda()) return cudaTarget();
  fail("codegen: no target for {} in this build", device.str());
}

void registerTarget(DeviceType type, const Target* target) {
  Targets& t = targets();
  std::lock_guard lock(t.mutex);
  for (auto& [registeredType, registered] : t.registered) {
    if (registeredType == type) {
      registered = target;
      return;
    }
  }
  t.registered.emplace_back(type, target);
}

}  // namespace kiln::codegen
