// kiln's autograd, as the user sees it (docs/autograd.md): Tensor's
// requiresGrad/setRequiresGrad/grad/backward/detach (frontend/tensor.h),
// NoGradGuard, gradcheck, and hooks into backward (hooks.h).
#pragma once

#include "frontend/autograd/grad_mode.h"
#include "frontend/autograd/gradcheck.h"
#include "frontend/autograd/hooks.h"
