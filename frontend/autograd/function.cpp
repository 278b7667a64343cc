// attach(): FunctionNode (a backward function with the input types it
// converts gradients back to) and AccumulateGrad (a leaf's .grad).
#include "frontend/autograd/function.h"

#include <fmt/format.h>

#include <algorithm>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/reductions.h"
#include "frontend/trace.h"
#include "runtime/error.h"

namespace kiln::autograd {

namespace {

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, std::vector<ir::TensorType> inputTypes, BackwardFn fn)
      : Node(std::move(name)), inputTypes_(std::move(inputTypes)), fn_(std::move(fn)) {}

  std::vector<Tensor> apply(const std::vector<Tensor>& gradOutputs) override {
    KILN_CHECK(fn_,
               "backward: trying to backward through {} a second time, after its saved tensors were freed; call "
               "backward(gradient, /*retainGraph=*/true) the first time to backward twice",
               name());
    std::vector<Tensor> grads = fn_(gradOutputs);
    KILN_ASSERT(grads.size() == inputTypes_.size(), "{} returned {} gradients for {} inputs", name(), grads.size(),
                inputTypes_.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() || !next[i].node) continue;
      const ir::TensorType& want = inputTypes_[i];
      Tensor g = sumToShape(grads[i], want.shape);
      if (g.dtype() != want.dtype) g = g.to(want.dtype);
      grads[i] = g;
    }
    return grads;
  }
  void release() override { fn_ = nullptr; }

 private:
  std::vector<ir::TensorType> inputTypes_;
  BackwardFn fn_;
};

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
    outputTypes.push_back(leaf_->type);
  }
  std::vector<Tensor> apply(const std::vector<Tensor>& gradOutputs) override {
    const Tensor& g = gradOutputs.at(0);
    if (!g.defined()) return {};
    Tensor leaf(leaf_);
    // A gradient may be an expanded view (sum's backward): store it
    // contiguous, as a tensor of its own that optimizers can update.
    Tensor add = !g.isContiguous() ? g.contiguous() : g.impl()->isView ? g.clone() : g;
    // Through grad() and setGrad(), which a trace intercepts for eager
    // leaves (Note [Writes into eager state] in frontend/trace.h).
    const Tensor before = leaf.grad();
    leaf.setGrad(before.defined() ? shallowCopy(before + add) : shallowCopy(add));
    // A copy of the list: a hook may register or remove hooks.
    if (const Meta* meta = leaf_->autograd.get(); meta && !meta->postAccumulateGradHooks.empty()) {
      const auto hooks = meta->postAccumulateGradHooks;
      for (const auto& [id, hook] : hooks) hook(leaf);
    }
    return {};
  }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

}  // namespace

SavedTensor::SavedTensor(const Tensor& t) : data_(shallowCopy(t)), version_(*t.impl()->version) {}

Tensor SavedTensor::unpack(const std::string& node) const {
  KILN_CHECK(!released_,
             "backward: trying to backward through {} a second time, after its saved tensors were freed; call "
             "backward(gradient, /*retainGraph=*/true) the first time to backward twice",
             node);
  const uint64_t now = *data_.impl()->version;
  KILN_CHECK(now == version_,
             "backward: a tensor {} saved by {} for the gradient was modified by an in-place operation: it is at "
             "version {}, expected version {} (clone it before the in-place op, or make the op out of place)",
             data_.str(), node, now, version_);
  return data_;
}

Meta& metaOf(const Tensor& t) {
  if (!t.impl()->autograd) t.impl()->autograd = std::make_shared<Meta>();
  return *t.impl()->autograd;
}

Tensor shallowCopy(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->autograd = nullptr;
  return Tensor(std::move(impl));
}

Edge gradientEdge(const Tensor& t) {
  Meta* meta = t.impl()->autograd.get();
  if (!meta) return {};
  if (meta->gradFn) return {meta->gradFn, meta->outputNr};
  if (!meta->requiresGrad) return {};
  std::shared_ptr<Node> acc = meta->accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.implPtr());
    meta->accumulator = acc;
  }
  return {acc, 0};
}

namespace {
thread_local GradInputObserver* observer = nullptr;
}  // namespace

GradInputObserver::GradInputObserver() : outer_(observer) { observer = this; }
GradInputObserver::~GradInputObserver() { observer = outer_; }

bool needsGrad(std::span<const Tensor> inputs) {
  if (GradInputObserver* o = observer) {
    for (const Tensor& t : inputs) {
      if (!t.defined() || !t.requiresGrad()) continue;
      const bool known = std::any_of(o->seen_.begin(), o->seen_.end(),
                                     [&](const Tensor& s) { return s.impl() == t.impl(); });
      if (!known) o->seen_.push_back(t);
    }
  }
  if (!isGradEnabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.requiresGrad(); });
}

void attach(const std::string& name, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
            BackwardFn backward) {
  if (!needsGrad(inputs)) return;
  std::vector<ir::TensorType> types;
  for (const Tensor& t : inputs) types.push_back(t.defined() ? t.type() : ir::TensorType{});
  auto node = std::make_shared<FunctionNode>(name, std::move(types), std::move(backward));
  for (const Tensor& t : inputs) node->next.push_back(t.defined() ? gradientEdge(t) : Edge{});
  for (size_t i = 0; i < outputs.size(); ++i) {
    node->outputTypes.push_back(outputs[i].type());
    if (!isFloatingPoint(outputs[i].dtype())) continue;  // integer and bool results carry no gradient
    Meta& meta = metaOf(outputs[i]);
    meta.gradFn = node;
    meta.outputNr = static_cast<int>(i);
  }
}

Tensor sumToShape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.dim() - static_cast<int>(shape.size());
  KILN_ASSERT(lead >= 0, "gradient {} has fewer dims than {}", g.str(), ir::shapeStr(shape));
  std::vector<int64_t> dims;
  for (int d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.shape() == shape ? r : r.reshape(shape);
}

}  // namespace kiln::autograd
