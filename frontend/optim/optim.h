// kiln::optim, as torch.optim and libtorch's torch::optim (docs/nn.md):
// the Optimizer base with parameter groups (frontend/optim/optimizer.h),
// SGD, Adam and AdamW, and learning-rate schedules (StepLR,
// CosineAnnealingLR, LinearLR). Updates follow PyTorch's single-tensor
// code paths operation by operation and run as in-place eager ops under a
// NoGradGuard.
#pragma once

#include "frontend/optim/adam.h"
#include "frontend/optim/lr_scheduler.h"
#include "frontend/optim/optimizer.h"
#include "frontend/optim/sgd.h"
