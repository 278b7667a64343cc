// Tracing state for kiln::compile.
#include "frontend/trace.h"

#include <fmt/format.h>

#include "frontend/autograd/node.h"
#include "frontend/per_call.h"
#include "runtime/error.h"

namespace kiln::detail {

namespace {
thread_local TraceState* tCurrent = nullptr;

/// Whether two eager tensors are the same elements: one storage, offset,
/// strides and type (a tensor, its detach()ed twin, a saved copy of it).
bool sameElements(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage && a.storageOffset() == b.storageOffset() &&
         a.strides() == b.strides() && a.type() == b.type();
}

/// Whether `grad` still has the type a trace saw (`type`), or is still
/// undefined (`type` null).
bool gradIs(const std::shared_ptr<TensorImpl>& leaf, const std::optional<ir::TensorType>& type) {
  const autograd::Meta* meta = leaf->autograd.get();
  const Tensor g = meta ? meta->grad : Tensor();
  return type ? g.defined() && g.type() == *type : !g.defined();
}
}  // namespace

TraceState* TraceState::current() { return tCurrent; }

TraceState::EagerRecord& TraceState::recordOf(const Tensor& t, const char* op) {
  EagerRecord* same = nullptr;
  for (EagerRecord& r : eager_) {
    if (r.tensor.impl()->storage != t.impl()->storage) continue;
    if (sameElements(r.tensor, t)) {
      same = &r;
    } else {
      KILN_CHECK(!r.written,
                 "{}: {} shares storage with {}, which the traced function modified in place; kiln::compile cannot "
                 "keep two different views of written storage coherent (use the tensor itself, or clone the view "
                 "before the write)",
                 op, t.str(), r.tensor.str());
    }
  }
  if (same) return *same;
  eager_.push_back({t, nullptr, false, -1});
  return eager_.back();
}

ir::Value* TraceState::valueOf(const Tensor& t, const char* op) {
  TensorImpl* impl = t.impl();
  if (impl->traced) {
    KILN_CHECK(impl->trace == this, "{}: {} was traced by another kiln::compile call and has no value here", op,
               t.str());
    return impl->traced;
  }
  EagerRecord& r = recordOf(t, op);
  if (!r.latest) {
    r.latest = graph->addInput(t.type(), "c" + std::to_string(bindings.size()));
    r.input = graph->numInputs() - 1;
    bindings.push_back(
        {InputBinding::Kind::capture, {graph->numInputs() - 1}, t.str(), [tensor = t](std::span<const Tensor>) {
           return std::vector<Tensor>{tensor};
         }});
  }
  return r.latest;
}

void TraceState::writeEager(const Tensor& target, const Tensor& result, const char* op) {
  KILN_ASSERT(result.isTraced() && result.impl()->trace == this, "{}: writing a value of another trace", op);
  KILN_CHECK(!target.impl()->isView,
             "{}: in-place writes into a view of an eager tensor are not supported while tracing (kiln::compile); {} "
             "is a view (write into the tensor itself)",
             op, target.str());
  EagerRecord& r = recordOf(target, op);
  r.latest = result.impl()->traced;
  r.written = true;
}

TraceState::GradRecord& TraceState::gradRecordOf(const Tensor& leaf) {
  for (GradRecord& r : grads_)
    if (r.leaf == leaf.implPtr()) return r;
  grads_.push_back({leaf.implPtr(), Tensor(), nullptr, false, false});
  return grads_.back();
}

Tensor TraceState::gradOf(const Tensor& leaf) {
  GradRecord& r = gradRecordOf(leaf);
  if (r.known) return r.current;
  // The first read of a gradient the trace has not assigned: it is the
  // leaf's gradient at each call, which must exist with this type, or not
  // exist, as now (a guard).
  const autograd::Meta* meta = leaf.impl()->autograd.get();
  const Tensor g = meta ? meta->grad : Tensor();
  std::optional<ir::TensorType> type;
  if (g.defined()) {
    KILN_CHECK(!g.isTraced(), "grad: the gradient of {} belongs to another trace", leaf.str());
    type = g.type();
    r.initial = graph->addInput(g.type(), "g" + std::to_string(bindings.size()));
    r.current = wrap(r.initial);
    bindings.push_back(
        {InputBinding::Kind::grad,
         {graph->numInputs() - 1},
         "the gradient of " + leaf.str(),
         [impl = leaf.implPtr()](std::span<const Tensor>) { return std::vector<Tensor>{impl->autograd->grad}; }});
  }
  guards.push_back({fmt::format("the gradient of {} is {}", leaf.str(), type ? type->str() : "undefined"),
                    [impl = leaf.implPtr(), type](std::span<const Tensor>) { return gradIs(impl, type); }});
  r.known = true;
  return r.current;
}

void TraceState::setGradOf(const Tensor& leaf, const Tensor& grad) {
  GradRecord& r = gradRecordOf(leaf);
  r.current = grad.defined() && !grad.isTraced() ? wrap(valueOf(grad, "setGrad")) : grad;
  r.known = true;
  r.assigned = true;
}

std::vector<Tensor> TraceState::perCall(const std::vector<PerCallInput>& inputs,
                                        std::function<std::vector<Tensor>()> compute) {
  InputBinding b{InputBinding::Kind::perCall, {}, {}, nullptr};
  std::vector<Tensor> values;
  std::vector<ir::TensorType> types;
  for (const PerCallInput& in : inputs) {
    const std::string name = in.name + std::to_string(perCallNames_[in.name]++);
    b.what += (b.what.empty() ? "" : ", ") + name;
    values.push_back(wrap(graph->addInput(in.type, name)));
    b.inputs.push_back(graph->numInputs() - 1);
    types.push_back(in.type);
  }
  b.bind = [what = b.what, types, compute = std::move(compute)](std::span<const Tensor>) {
    std::vector<Tensor> got = compute();
    KILN_ASSERT(got.size() == types.size(), "{}: {} values for {} inputs", what, got.size(), types.size());
    for (size_t i = 0; i < got.size(); ++i)
      KILN_ASSERT(got[i].defined() && got[i].dtype() == types[i].dtype && got[i].shape() == types[i].shape &&
                      (got[i].device() == types[i].device || got[i].device().isCpu()),
                  "{}: value {} is {}, traced as {}", what, i, got[i].defined() ? got[i].str() : "undefined",
                  types[i].str());
    return got;
  };
  bindings.push_back(std::move(b));
  return values;
}

void TraceState::guard(std::string what, std::function<bool()> holds) {
  guards.push_back({std::move(what), [holds = std::move(holds)](std::span<const Tensor>) { return holds(); }});
}

std::vector<TraceWrite> TraceState::finish(std::vector<ir::Value*>& outputs) {
  std::vector<TraceWrite> writes;
  for (const EagerRecord& r : eager_) {
    if (!r.written) continue;
    writes.push_back({TraceWrite::Kind::elements, r.tensor, static_cast<int>(outputs.size()), r.input});
    outputs.push_back(r.latest);
  }
  for (const GradRecord& r : grads_) {
    // A gradient changed when it was assigned, or written in place through
    // the tensor .grad returned (zero_(), say).
    const bool changed = r.assigned || (r.current.defined() && r.current.impl()->traced != r.initial);
    if (!changed) continue;
    if (!r.current.defined()) {
      writes.push_back({TraceWrite::Kind::grad, Tensor(r.leaf), -1, -1});
      continue;
    }
    writes.push_back({TraceWrite::Kind::grad, Tensor(r.leaf), static_cast<int>(outputs.size()), -1});
    outputs.push_back(valueOf(r.current, "backward"));
  }
  return writes;
}

Tensor TraceState::wrap(ir::Value* value) { return wrap(value, ir::contiguousLayout(value->type().shape)); }

Tensor TraceState::wrap(ir::Value* value, ir::Layout layout) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = value->type();
  impl->strides = std::move(layout.strides);
  impl->offset = layout.offset;
  impl->traced = value;
  impl->trace = this;
  return Tensor(std::move(impl));
}

TraceGuard::TraceGuard(TraceState* state) : previous_(tCurrent) { tCurrent = state; }
TraceGuard::~TraceGuard() { tCurrent = previous_; }

}  // namespace kiln::detail
