// Activation checkpointing, as torch.utils.checkpoint.checkpoint: trade
// compute for memory by keeping only a function's inputs for backward and
// running the function again when its gradient is needed.
//
//   Tensor h = x;
//   for (auto& block : blocks)
//     h = kiln::checkpoint([&](const Tensor& in) { return block->forward(in); }, h);
//
// Note [Activation checkpointing]
// Forward runs `fn` with grad mode off, so none of its intermediates is
// kept, while two things are observed: the tensors requiring grad it reads
// from outside its inputs (parameters and other captured tensors, through
// autograd::GradInputObserver) and its random draws (detail::DrawRecording,
// Note [Replayed draws]). Its outputs get one backward node whose inputs
// are fn's inputs and those outside tensors. That node's backward detaches
// the inputs, runs `fn` again with grad mode on, replaying the recorded
// draws (so dropout masks are the forward's), and runs the recomputed
// tape from the outputs' gradients down to the detached inputs and the
// outside tensors, capturing the gradients that reach them
// (autograd::runBackwardCapturing) rather than accumulating: they flow on
// through the outer backward like any node's, so hooks (DDP's) fire as
// usual and gradients equal the uncheckpointed ones bit for bit. This is
// PyTorch's reentrant variant, minus its pitfall: parameters get gradients
// even when no input requires grad.
//
// Under kiln::compile the same happens in the trace: the recomputation is
// traced where backward runs, reading the forward's per-call draws, and its
// nodes read the inputs through `recompute` barriers (ir/Ops.def), so cse
// does not merge them back into the forward's and the memory plan frees the
// forward's intermediates at once.
//
// `fn` must compute the same thing each time (same ops, same draws: a
// different number of draws is an error), must not write into tensors
// outside it, and runs twice: its side effects happen twice.
#pragma once

#include <concepts>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// fn(inputs), keeping only `inputs` (and the draws fn makes) for backward.
/// With grad mode off, or when nothing fn reads requires grad, just fn(inputs).
std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs);

namespace detail {
template <class Fn, size_t... I>
std::vector<Tensor> callUnpacked(const Fn& fn, const std::vector<Tensor>& in, std::index_sequence<I...>) {
  return {Tensor(fn(in[I]...))};
}
}  // namespace detail

/// fn(inputs...) for a function of tensors returning one tensor.
template <class Fn, class... Ts>
  requires(std::same_as<Ts, Tensor> && ...) && std::convertible_to<std::invoke_result_t<Fn, const Ts&...>, Tensor>
Tensor checkpoint(Fn fn, const Ts&... inputs) {
  CheckpointFunction f = [fn = std::move(fn)](const std::vector<Tensor>& in) {
    return detail::callUnpacked(fn, in, std::index_sequence_for<Ts...>{});
  };
  return checkpoint(f, std::vector<Tensor>{inputs...}).at(0);
}

}  // namespace kiln
