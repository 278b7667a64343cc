// The deterministic-algorithms flag (runtime/determinism.h).
#include "runtime/determinism.h"

#include <atomic>

namespace kiln::runtime {

namespace {
std::atomic<bool> flag{false};
}  // namespace

void setDeterministic(bool enabled) { flag.store(enabled, std::memory_order_relaxed); }
bool deterministic() { return flag.load(std::memory_order_relaxed); }

}  // namespace kiln::runtime
