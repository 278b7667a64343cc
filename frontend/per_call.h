// Host code that stays correct under kiln::compile: numbers computed from
// host state at every call, guards on host state, and state made eagerly
// inside a trace. Eagerly, each does the obvious thing at once. Internal to
// the frontend (dropout, the optimizers), for code whose host-side state
// changes between calls (Note [Per-call values], Note [Guards] in
// frontend/trace.h).
//
//   // Adam's bias corrections: at every call, from the step count.
//   std::vector<Tensor> k = detail::perCall({{"adam_step", {DType::f32, {}, dev}}},
//       [&state] { ++state.step; return std::vector<Tensor>{scalar(...)}; });
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "frontend/trace.h"

namespace kiln::detail {

struct PerCallInput {
  std::string name;  ///< of the graph input (numbered per trace: name0, name1, ...)
  ir::TensorType type;
};

/// The tensors `compute` returns, one per entry of `inputs` and of its type.
/// Eagerly `compute` runs now; inside kiln::compile they are graph inputs
/// and `compute` runs at every call of the program, in trace order, and not
/// while tracing. `compute` makes them on the CPU (or on the input's
/// device): eagerly they are moved to the input's device, and a compiled
/// program uploads all of a call's at once (Note [Per-call values are
/// uploaded together] in runtime/executable_replay.cpp).
std::vector<Tensor> perCall(const std::vector<PerCallInput>& inputs, std::function<std::vector<Tensor>()> compute);

/// Inside kiln::compile, makes the program depend on `holds()` staying
/// true (it is true now): a call where it is false traces again. Eagerly,
/// nothing.
void guardHost(std::string what, std::function<bool()> holds);

/// While alive, ops run eagerly even inside kiln::compile: for arithmetic
/// on state that must not become part of the program (nn::init). Factories
/// (zeros, randn) make eager tensors anyway. Traced tensors cannot be used
/// in the scope.
class EagerScope {
 public:
  EagerScope() : guard_(nullptr) {}

 private:
  TraceGuard guard_;
};

}  // namespace kiln::detail
