// kiln's autograd, as the user sees it (docs/autograd.md): Tensor's
// requiresGrad/setRequiresGrad/grad/backward/detach (frontend/tensor.h),
// NoGradGuard, and gradcheck.
#pragma once

#include "frontend/autograd/grad_mode.h"
#include "frontend/autograd/gradcheck.h"
