// Hooks into backward, as PyTorch's Tensor.register_post_accumulate_grad_hook
// and Variable._execution_engine.queue_callback: a function run on a leaf
// right after backward accumulated a gradient into its grad(), and a function
// run once the current backward has finished. Data parallelism is their user
// (frontend/nn/ddp.cpp: a parameter's gradient goes into its bucket as soon
// as it is complete; the end of backward waits for the all-reduces).
//
// Both run on the thread that runs backward, with grad mode off. An error
// they throw ends backward and propagates out of Tensor::backward. Under
// kiln::compile a hook would see traced gradients: use them in eager code.
#pragma once

#include <cstdint>
#include <functional>

#include "frontend/tensor.h"

namespace kiln::autograd {

/// Called with the leaf, whose grad() holds the accumulated gradient.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// Runs `hook` after each accumulation into `leaf`'s gradient during
/// backward (hooks run in registration order). `leaf` is a leaf that
/// requires grad. Returns a handle for removePostAccumulateGradHook.
uint64_t registerPostAccumulateGradHook(const Tensor& leaf, PostAccumulateGradHook hook);
/// Removes the hook `handle` from `leaf` (nothing when it is gone already).
void removePostAccumulateGradHook(const Tensor& leaf, uint64_t handle);

/// Runs `callback` when the backward running on this thread has finished
/// (after every node ran; callbacks in the order queued, including ones a
/// callback queues). kiln::Error when no backward is running on this thread.
void queueCallback(std::function<void()> callback);
/// Whether a backward is running on this thread (inside a node or a hook).
bool isBackwardRunning();

}  // namespace kiln::autograd
