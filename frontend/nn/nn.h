// kiln::nn, as torch.nn and libtorch's torch::nn (docs/nn.md): the Module
// base (frontend/nn/module.h), layers (Linear, LayerNorm, BatchNorm2d,
// GroupNorm, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout, ReLU,
// GELU, Softplus, Embedding, Sequential), each a FooImpl module with a Foo handle,
// and weight initialization (nn::init). Layers compute with kiln's eager
// ops, so a model runs eagerly, records gradients, and traces under
// kiln::compile like any other code.
#pragma once

#include "frontend/nn/activation.h"
#include "frontend/nn/batch_norm.h"
#include "frontend/nn/clip_grad.h"
#include "frontend/nn/conv.h"
#include "frontend/nn/ddp.h"
#include "frontend/nn/dropout.h"
#include "frontend/nn/embedding.h"
#include "frontend/nn/init.h"
#include "frontend/nn/linear.h"
#include "frontend/nn/module.h"
#include "frontend/nn/normalization.h"
#include "frontend/nn/ordered_dict.h"
#include "frontend/nn/pooling.h"
#include "frontend/nn/sequential.h"
