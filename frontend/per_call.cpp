// Host code under kiln::compile (frontend/per_call.h).
#include "frontend/per_call.h"

namespace kiln::detail {

std::vector<Tensor> perCall(const std::vector<PerCallInput>& inputs, std::function<std::vector<Tensor>()> compute) {
  if (TraceState* trace = TraceState::current()) return trace->perCall(inputs, std::move(compute));
  return compute();
}

void guardHost(std::string what, std::function<bool()> holds) {
  if (TraceState* trace = TraceState::current()) trace->guard(std::move(what), std::move(holds));
}

}  // namespace kiln::detail
