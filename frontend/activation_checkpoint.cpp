// kiln::checkpoint (Note [Activation checkpointing] in
// frontend/activation_checkpoint.h).
#include "frontend/activation_checkpoint.h"

#include <algorithm>

#include "frontend/amp/autocast.h"
#include "frontend/autograd/engine.h"
#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/autograd/node.h"
#include "frontend/draw_replay.h"
#include "frontend/ops.h"
#include "runtime/error.h"

namespace kiln {

namespace {

constexpr const char* kName = "checkpoint";

/// What backward needs: the inputs (saved, so an in-place write into one is
/// caught), the forward's draws, the outside tensors' edges and the
/// outputs' types.
struct Saved {
  CheckpointFunction fn;
  std::vector<autograd::SavedTensor> inputs;
  std::vector<bool> inputRequiresGrad;
  std::vector<detail::Draw> draws;
  std::vector<autograd::Edge> outside;
  std::vector<ir::TensorType> outputTypes;
  detail::AutocastDTypes autocast;  ///< the forward's, restored for the recomputation (as PyTorch's checkpoint)
};

std::vector<Tensor> recompute(Saved& s, const std::vector<Tensor>& gradOutputs) {
  // A gradient, once it exists the recomputation may run (traced only).
  Tensor after;
  for (const Tensor& g : gradOutputs)
    if (g.defined() && g.isTraced() && g.numel() > 0) after = g;
  std::vector<Tensor> inputs;
  std::vector<autograd::Edge> captures;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    Tensor x = autograd::shallowCopy(s.inputs[i].unpack("CheckpointBackward"));
    if (s.inputRequiresGrad[i]) x.setRequiresGrad(true);
    captures.push_back(autograd::gradientEdge(x));
    // Traced, the recomputation reads the input through a barrier after a
    // gradient, or cse and fusion would merge it back into the forward
    // (Note [Activation checkpointing]).
    if (x.isTraced() && after.defined() && isFloatingPoint(x.dtype())) {
      GradModeGuard grad(true);
      x = optimizationBarrier(x, after);
    }
    inputs.push_back(std::move(x));
  }
  captures.insert(captures.end(), s.outside.begin(), s.outside.end());

  std::vector<Tensor> outputs;
  {
    GradModeGuard grad(true);
    detail::AutocastStateGuard autocast(s.autocast);
    detail::DrawReplay replay(s.draws, kName);
    outputs = s.fn(inputs);
    replay.finish();
  }
  KILN_CHECK(outputs.size() == s.outputTypes.size(),
             "checkpoint: the recomputation returned {} tensors, the forward {}; the function must compute the same "
             "thing each time it runs",
             outputs.size(), s.outputTypes.size());
  std::vector<Tensor> roots, rootGrads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK(outputs[i].defined() && outputs[i].type() == s.outputTypes[i],
               "checkpoint: the recomputation's result {} is {}, the forward's was {}; the function must compute "
               "the same thing each time it runs",
               i, outputs[i].defined() ? outputs[i].str() : "undefined", s.outputTypes[i].str());
    if (!gradOutputs[i].defined() || !autograd::gradientEdge(outputs[i]).node) continue;
    roots.push_back(outputs[i]);
    rootGrads.push_back(gradOutputs[i]);
  }
  if (roots.empty()) return std::vector<Tensor>(captures.size());
  return autograd::runBackwardCapturing(roots, rootGrads, captures);
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs) {
  KILN_CHECK(fn != nullptr, "checkpoint: an empty function");
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_CHECK(inputs[i].defined(), "checkpoint: input {} is an undefined tensor", i);
  if (!isGradEnabled()) return fn(inputs);

  auto saved = std::make_shared<Saved>();
  std::vector<Tensor> outputs;
  std::vector<Tensor> outside;
  {
    // No intermediate is kept; the outside tensors and draws are noted.
    autograd::GradInputObserver observer;
    detail::DrawRecording recording;
    NoGradGuard noGrad;
    outputs = fn(inputs);
    saved->draws = recording.take();
    for (const Tensor& t : observer.seen())
      if (std::none_of(inputs.begin(), inputs.end(), [&](const Tensor& x) { return x.impl() == t.impl(); }))
        outside.push_back(t);
  }
  const bool anyInput = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& x) { return x.requiresGrad(); });
  if (!anyInput && outside.empty()) return outputs;

  // Fresh handles: an output that is an input (or another output) must not
  // take over that tensor's place on the tape.
  for (Tensor& y : outputs) {
    KILN_CHECK(y.defined(), "checkpoint: the function returned an undefined tensor");
    y = autograd::shallowCopy(y);
    saved->outputTypes.push_back(y.type());
  }
  saved->fn = fn;
  saved->autocast = detail::autocastDTypes();
  for (const Tensor& x : inputs) {
    saved->inputs.emplace_back(x);
    saved->inputRequiresGrad.push_back(x.requiresGrad());
  }
  for (const Tensor& t : outside) saved->outside.push_back(autograd::gradientEdge(t));

  std::vector<Tensor> tapeInputs = inputs;
  tapeInputs.insert(tapeInputs.end(), outside.begin(), outside.end());
  autograd::attach("CheckpointBackward", tapeInputs, outputs,
                   [saved](const std::vector<Tensor>& gradOutputs) { return recompute(*saved, gradOutputs); });
  return outputs;
}

}  // namespace kiln
