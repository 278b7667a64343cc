// The thread's grad mode.
#include "frontend/autograd/grad_mode.h"

namespace kiln {

namespace {
thread_local bool tGradEnabled = true;
}

bool isGradEnabled() { return tGradEnabled; }

GradModeGuard::GradModeGuard(bool enabled) : previous_(tGradEnabled) { tGradEnabled = enabled; }
GradModeGuard::~GradModeGuard() { tGradEnabled = previous_; }

}  // namespace kiln
