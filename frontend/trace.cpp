// Tracing state for kiln::compile.
#include "frontend/trace.h"

#include "runtime/error.h"

namespace kiln::detail {

namespace {
thread_local TraceState* tCurrent = nullptr;
}

TraceState* TraceState::current() { return tCurrent; }

ir::Value* TraceState::valueOf(const Tensor& t, const char* op) {
  TensorImpl* impl = t.impl();
  if (impl->traced) {
    KILN_CHECK(impl->trace == this, "{}: {} was traced by another kiln::compile call and has no value here", op, t.str());
    return impl->traced;
  }
  auto it = captured_.find(impl);
  if (it != captured_.end()) return it->second;
  ir::Value* v = graph->addInput(t.type(), "c" + std::to_string(captures.size()));
  captures.push_back(t);
  captured_.emplace(impl, v);
  return v;
}

std::pair<Tensor, Tensor> TraceState::draw(const Generator& generator, Device device) {
  const ir::TensorType type{DType::i64, {}, device};
  const size_t n = draws.size();
  ir::Value* seed = graph->addInput(type, "seed" + std::to_string(n));
  ir::Value* offset = graph->addInput(type, "offset" + std::to_string(n));
  draws.push_back({generator, device, graph->numInputs() - 2, graph->numInputs() - 1});
  return {wrap(seed), wrap(offset)};
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
