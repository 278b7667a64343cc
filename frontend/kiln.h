// kiln: the one header a user includes (DESIGN.md §1).
//
//   #include <kiln/frontend/kiln.h>
//
//   kiln::Tensor x = kiln::randn({4096, 4096});
//   auto f = kiln::compile([](const kiln::Tensor& x) { return kiln::relu(x * 2.0 + 1.0); });
//   kiln::Tensor y = f(x);
#pragma once

#include "frontend/activation_checkpoint.h"
#include "frontend/amp/autocast.h"
#include "frontend/amp/grad_scaler.h"
#include "frontend/attention.h"
#include "frontend/checkpoint.h"
#include "frontend/autograd/autograd.h"
#include "frontend/compile.h"
#include "frontend/conv.h"
#include "frontend/cuda.h"
#include "frontend/data/data.h"
#include "frontend/distributed.h"
#include "frontend/dropout.h"
#include "frontend/indexing.h"
#include "frontend/linalg.h"
#include "frontend/losses.h"
#include "frontend/nn/nn.h"
#include "frontend/normalization.h"
#include "frontend/ops.h"
#include "frontend/optim/optim.h"
#include "frontend/pooling.h"
#include "frontend/profiler.h"
#include "frontend/random.h"
#include "frontend/reductions.h"
#include "frontend/serialization.h"
#include "frontend/tensor.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/device_memory.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/stream.h"
