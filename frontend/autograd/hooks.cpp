// Post-accumulate-grad hooks and end-of-backward callbacks
// (frontend/autograd/hooks.h). The hooks live in the leaf's autograd Meta
// and AccumulateGrad calls them (frontend/autograd/function.cpp); the
// callbacks go into the list of the backward running on this thread, which
// runBackward (frontend/autograd/engine.cpp) runs at its end.
#include "frontend/autograd/hooks.h"

#include <algorithm>
#include <atomic>

#include "frontend/autograd/node.h"
#include "runtime/error.h"

namespace kiln::autograd {

/// The callbacks of the backward running on this thread (null: none runs).
thread_local std::vector<std::function<void()>>* currentBackwardCallbacks = nullptr;

uint64_t registerPostAccumulateGradHook(const Tensor& leaf, PostAccumulateGradHook hook) {
  static std::atomic<uint64_t> nextId{1};
  KILN_CHECK(leaf.defined(), "registerPostAccumulateGradHook: use of an undefined tensor");
  KILN_CHECK(leaf.isLeaf() && leaf.requiresGrad(),
             "registerPostAccumulateGradHook: {} is not a leaf that requires grad (only leaves accumulate gradients)",
             leaf.str());
  KILN_CHECK(hook != nullptr, "registerPostAccumulateGradHook: an empty hook for {}", leaf.str());
  const uint64_t id = nextId.fetch_add(1);
  metaOf(leaf).postAccumulateGradHooks.emplace_back(id, std::move(hook));
  return id;
}

void removePostAccumulateGradHook(const Tensor& leaf, uint64_t handle) {
  if (!leaf.defined() || !leaf.impl()->autograd) return;
  auto& hooks = leaf.impl()->autograd->postAccumulateGradHooks;
  std::erase_if(hooks, [&](const auto& h) { return h.first == handle; });
}

void queueCallback(std::function<void()> callback) {
  KILN_CHECK(currentBackwardCallbacks != nullptr,
             "queueCallback: no backward is running on this thread (queue callbacks from a hook or a node)");
  currentBackwardCallbacks->push_back(std::move(callback));
}

bool isBackwardRunning() { return currentBackwardCallbacks != nullptr; }

}  // namespace kiln::autograd
