// Host code under kiln::compile (frontend/per_call.h).
#include "frontend/per_call.h"

namespace kiln::detail {

std::vector<Tensor> perCall(const std::vector<PerCallInput>& inputs, std::function<std::vector<Tensor>()> compute) {
  if (TraceState* trace = TraceState::current()) return trace->perCall(inputs, std::move(compute));
  std::vector<Tensor> values = compute();
  for (size_t i = 0; i < values.size() && i < inputs.size(); ++i)
    if (values[i].device() != inputs[i].type.device) values[i] = values[i].to(inputs[i].type.device);
  return values;
}

void guardHost(std::string what, std::function<bool()> holds) {
  if (TraceState* trace = TraceState::current()) trace->guard(std::move(what), std::move(holds));
}

}  // namespace kiln::detail
