// The built-in models shared by the tools: each is a function of tensors
// with the argument types it is traced at. `irdump --example NAME` traces
// one, and kiln-bench measures the same functions eager and compiled, so
// what is inspected is what is measured.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::tools {

using ModelFn = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs);

struct Model {
  std::string name;
  std::string summary;
  ModelFn fn;
  std::vector<ir::TensorType> inputs;  ///< the argument types it is traced and benchmarked at
};

/// Every built-in model.
std::span<const Model> models();
/// The model called `name`, or nullptr.
const Model* findModel(const std::string& name);

/// The 8-op elementwise chain of a fused epilogue: mul, add, relu, sub, mul,
/// maximum, minimum, neg (scale, shift, activation, clamp). Memory-bound.
Tensor chain8(const Tensor& x);
/// An 8-op chain heavy in arithmetic: mul, add, relu, add, sqrt, sub,
/// sigmoid, maximum. On a few cores it is bound by sqrt, the division and
/// exp's polynomial, not by memory.
Tensor chain8Math(const Tensor& x);
/// Broadcasting bias-add + relu: relu(x + b) with b over the last dimension.
Tensor biasRelu(const Tensor& x, const Tensor& b);

}  // namespace kiln::tools
