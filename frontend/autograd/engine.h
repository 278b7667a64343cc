// The backward engine's entry points (frontend/autograd/engine.cpp).
// Internal to the frontend: users call Tensor::backward.
#pragma once

#include <vector>

#include "frontend/autograd/node.h"
#include "frontend/tensor.h"

namespace kiln::autograd {

/// Runs the tape from `roots` (seeded with `rootGrads`) to the leaves,
/// accumulating into their grad().
void runBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads, bool retainGraph);

/// As runBackward, but the gradient that reaches each edge of `captures` is
/// returned (one per capture; undefined where none arrived) instead of
/// flowing on: the nodes the captures point at do not run, and nothing
/// beyond them is visited, as torch.autograd.grad's inputs. Activation
/// checkpointing's recomputation uses it (frontend/activation_checkpoint.cpp).
std::vector<Tensor> runBackwardCapturing(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads,
                                         const std::vector<Edge>& captures);

}  // namespace kiln::autograd
