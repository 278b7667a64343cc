// backward(): runs the tape from the roots to the leaves.
//
// The nodes reachable from the roots are counted by how many edges lead into
// each (its dependencies); a node runs when every gradient it will receive
// has arrived (Kahn's order), with grad mode off, and the gradients it
// returns are added into the buffers of the nodes its edges lead to. A node
// whose output received nothing gets zeros of that output's type. Without
// retainGraph, each node frees what it saved after it ran. Callbacks queued
// during the run (queueCallback, frontend/autograd/hooks.h) run at its end;
// the post-accumulate-grad hooks live in the leaf's Meta and AccumulateGrad
// calls them (frontend/autograd/function.cpp). With captures
// (runBackwardCapturing), the captured nodes are sinks: what reaches them is
// returned, and they neither run nor lead further.
#include "frontend/autograd/engine.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <unordered_map>

#include "frontend/amp/autocast.h"
#include "frontend/autograd/function.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/autograd/hooks.h"
#include "frontend/autograd/node.h"
#include "frontend/ops.h"
#include "runtime/error.h"
#include "runtime/profiler_events.h"

namespace kiln::autograd {

namespace {

/// The callbacks of the backward running on this thread (null: none runs).
thread_local std::vector<std::function<void()>>* currentBackwardCallbacks = nullptr;

/// Makes `list` this thread's callback list for one backward (restoring the
/// outer one: a hook may run a backward of its own).
class CallbackScope {
 public:
  explicit CallbackScope(std::vector<std::function<void()>>* list) : outer_(currentBackwardCallbacks) {
    currentBackwardCallbacks = list;
  }
  ~CallbackScope() { currentBackwardCallbacks = outer_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  std::vector<std::function<void()>>* outer_;
};

struct Pending {
  int dependencies = 0;
  std::vector<Tensor> grads;  ///< one per output of the node
};

void addInto(std::vector<Tensor>& buffer, int index, const Tensor& g) {
  if (buffer.size() <= static_cast<size_t>(index)) buffer.resize(index + 1);
  Tensor& slot = buffer[index];
  slot = slot.defined() ? slot + g : g;
}

/// The engine: `captures` (may be empty) are sinks; returns the gradients
/// that reached them, one per capture.
std::vector<Tensor> run(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads, bool retainGraph,
                        const std::vector<Edge>& captures) {
  profiler::RecordFunction range("autograd", "backward");
  std::unordered_map<Node*, std::vector<size_t>> sinks;  // node -> indices into captures
  for (size_t i = 0; i < captures.size(); ++i)
    if (captures[i].node) sinks[captures[i].node.get()].push_back(i);
  std::vector<Tensor> captured(captures.size());
  std::unordered_map<Node*, Pending> pending;
  std::vector<std::shared_ptr<Node>> start;
  // Count dependencies over everything reachable from the roots.
  std::vector<Node*> stack;
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradientEdge(roots[i]);
    KILN_CHECK(e.node,
               "backward: {} does not require grad and has no grad_fn (mark a leaf with setRequiresGrad(), and do "
               "not compute the loss under a NoGradGuard)",
               roots[i].str());
    if (pending.emplace(e.node.get(), Pending{}).second) stack.push_back(e.node.get());
    start.push_back(e.node);
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (sinks.contains(n)) continue;
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      auto [it, inserted] = pending.emplace(e.node.get(), Pending{});
      it->second.dependencies++;
      if (inserted) stack.push_back(e.node.get());
    }
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    Edge e = gradientEdge(roots[i]);
    addInto(pending[e.node.get()].grads, e.inputNr, rootGrads[i]);
  }

  NoGradGuard noGrad;
  // Gradient formulas run on the dtypes the forward saved, never autocast:
  // PyTorch's engine threads do not see the forward's autocast state.
  detail::AutocastOff autocastOff;
  std::vector<std::function<void()>> callbacks;
  CallbackScope scope(&callbacks);
  std::deque<std::shared_ptr<Node>> ready;
  for (const auto& n : start)
    if (pending[n.get()].dependencies == 0 && std::find(ready.begin(), ready.end(), n) == ready.end())
      ready.push_back(n);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.front();
    ready.pop_front();
    Pending& p = pending[node.get()];
    std::vector<Tensor> grads = std::move(p.grads);
    if (auto sink = sinks.find(node.get()); sink != sinks.end()) {
      for (size_t i : sink->second)
        if (static_cast<size_t>(captures[i].inputNr) < grads.size()) captured[i] = grads[captures[i].inputNr];
      continue;
    }
    grads.resize(node->outputTypes.size());
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) {
        const ir::TensorType& t = node->outputTypes[i];
        grads[i] = zeros(t.shape, t.dtype, t.device);
      }
    std::vector<Tensor> inputGrads;
    {
      profiler::RecordFunction apply("autograd", node->name());
      inputGrads = node->apply(grads);
    }
    if (!retainGraph) node->release();
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.node) continue;
      Pending& q = pending[e.node.get()];
      if (i < inputGrads.size() && inputGrads[i].defined()) addInto(q.grads, e.inputNr, inputGrads[i]);
      if (--q.dependencies == 0) ready.push_back(e.node);
    }
  }
  // By index: a callback may queue more.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);
    callback();
  }
  return captured;
}

}  // namespace

void runBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads, bool retainGraph) {
  run(roots, rootGrads, retainGraph, {});
}

std::vector<Tensor> runBackwardCapturing(const std::vector<Tensor>& roots, const std::vector<Tensor>& rootGrads,
                                         const std::vector<Edge>& captures) {
  return run(roots, rootGrads, /*retainGraph=*/false, captures);
}

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
