// Tensor types of the IR: dtype, shape and device, printed as f32[8192,1024]@cpu.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"

namespace kiln::ir {

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  Device device;

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  /// "f32[8192,1024]@cpu"; a scalar is "f32[]@cpu".
  std::string str() const;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// "[8192,1024]".
std::string shapeStr(const Shape& shape);
/// The number of elements; saturates at INT64_MAX (negative sizes count as
/// too many too), so that no shape, however written, overflows.
int64_t numel(const Shape& shape);
/// The NumPy broadcast of two shapes; std::nullopt when they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);

}  // namespace kiln::ir
