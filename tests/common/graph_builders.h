// Short builders for hand-made graphs in tests: f32 types and one-line
// unary, binary and constant nodes (types from the registry's rules).
#pragma once

#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln::testutil {

inline ir::TensorType f32(ir::Shape shape) { return {DType::f32, std::move(shape), Device::cpu()}; }

inline ir::Value* un(ir::Graph& g, ir::Op op, ir::Value* a, ir::Attributes attrs = {}) {
  return g.create(op, std::vector<ir::Value*>{a}, std::move(attrs))->output();
}

inline ir::Value* bin(ir::Graph& g, ir::Op op, ir::Value* a, ir::Value* b) {
  return g.create(op, std::vector<ir::Value*>{a, b})->output();
}

/// A constant `v` of type f32[shape] (a scalar by default).
inline ir::Value* constant(ir::Graph& g, double v, ir::Shape shape = {}) {
  return g.createConstant(v, f32(std::move(shape)))->output();
}

}  // namespace kiln::testutil
